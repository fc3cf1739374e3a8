// Package projection is the read model of idem project: per-account totals
// kept from the transfer events idem serve -publish announces, each event
// applied through an inbox, in one transaction with the event id.
//
// The read model deliberately has no backstop of its own: it records one
// row per event it applies, so that GET /applied shows a transfer twice if
// the inbox ever let an event through twice, and the end-to-end tests can
// check the whole chain, not the projection's own deduplication.
package projection

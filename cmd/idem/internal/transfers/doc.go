// Package transfers is the account-transfer service of the incident behind
// idem, as a real service: accounts with integer-cent balances and
// transfers between them, with POST /transfers protected by an
// Idempotency-Key.
//
// # API
//
//	PUT  /accounts/{id}   {"balance": <int>}      200 {"id","balance"}   (absolute: naturally idempotent)
//	GET  /accounts/{id}                           200 {"id","balance"}   404 problem+json
//	POST /transfers       {"from","to","amount"}  201 {"id","from","to","amount","created_at"}, Location: /transfers/{id}
//	GET  /transfers/{id}                          200 {"id","from","to","amount","created_at"[,"message_id"][,"batch_id","row_id"]}   404 problem+json
//	GET  /transfers[?limit=N]                     200 {"transfers":[…],"count":N}, oldest first, streamed
//	POST /payouts         {"account","amount"}    201 {"id","account","amount","provider_charge_id","created_at"} (with Config.Leased)
//	GET  /payouts                                 200 {"payouts":[…],"count":N}, oldest first, streamed
//	GET  /healthz                                 200 ok: the process serves (liveness; no database)
//	GET  /readyz                                  200 ok, or 503 problem+json while the database does not answer
//
// POST /transfers requires an Idempotency-Key. An unknown account, a
// non-positive amount, a transfer to the same account, insufficient funds
// and a credit that would take a balance past the largest int64 are
// answered 422 (a final answer: recorded and replayed; every refusal is
// decided before the first write). Malformed JSON (trailing data
// included), an account id that is not 1 to 64 ASCII letters, digits or
// - _ . : @ (400), a body over 1 MiB (413) and a body that takes longer
// than Config.BodyTimeout to arrive (408) are refused before the
// idempotency layer and never recorded, so a corrected retry with the same
// key runs. No answer quotes more than a bounded part of the request, so a
// refusal always stays small enough to be recorded. A database failure, or
// work that outlasts Config.RequestTimeout (counted from the end of the
// body), is answered 503 with Retry-After: the transaction was rolled back
// and nothing was recorded, so the retry is safe.
//
// # Principals
//
// Authorization: Bearer <token> names the principal "bearer:" and the
// first 32 hex digits of the token's SHA-256 (demo authentication: any
// token is a principal of its own), which the service hands to the
// idempotency layer with idem.WithPrincipal; keys are scoped per
// principal. The token itself is never stored or logged: records, stored
// requests and log lines hold only its digest. A malformed Authorization header is refused with
// 401. A request without the header is the anonymous principal, and all
// anonymous requests share one scope: the demo allows them so that its
// clients need no credentials, but a real service would refuse anonymous
// writes.
//
// A transfer is one transaction: the debit, the credit, the transfer row and
// the idempotency record commit together. Balances never go negative (the
// debit is conditional and a CHECK constraint backs it) and money is
// conserved.
//
// # Transfer commands
//
// Service.ApplyMessage is an inbox.Handler: run by inbox.Process on the
// ledger's store, it applies a message whose body is the JSON of POST
// /transfers, with the same rules, in the inbox's transaction, so that the
// transfer and the message id commit together. What POST /transfers
// answers 400, 413 or 422 is refused (inbox.Refuse: settled, never
// retried); a database failure is retried. A transfer made from a message
// records the message id, exactly as published, and GET /transfers and
// GET /transfers/{id} show it as "message_id" (absent for transfers made
// over HTTP). New adds the column to a ledger created without it.
//
// # Imports
//
// Service.ImportTransfer applies one row of an import file (ParseImport;
// idem import) in the transaction batch.Run opens for the row, keyed by
// (batch id, row id) in ImportScope, with the same rules; a refusal is
// recorded with batch.Refuse. The transfer records the batch id and the
// row id, which GET /transfers and GET /transfers/{id} show as "batch_id"
// and "row_id" (absent for other transfers); the pair is unique in the
// ledger. New adds both columns and their index to a ledger created
// without them. See docs/BATCHES.md.
//
// # Payouts
//
// With Config.Leased and Config.Provider, POST /payouts pays money out
// through an external payment provider in leased mode: a local debit step,
// a charge at the provider under a key derived from the client's, then a
// local step that completes the payout, or credits it back after a decline
// (422 payout-declined). An unknown outcome at the provider is answered 503
// with Retry-After and never compensated; the retry or the completer
// resumes at the charge. Config.Leased's store may be Redis (any
// idem.LeasedStore that is not an idem.LeasedTxStore): the steps that write
// the ledger then commit there first, each able to find its own earlier
// commit, and are recorded after. See docs/PAYOUTS.md.
//
// The same service runs on SQLite (sqlitestore) and PostgreSQL (pgstore).
// With a nil Guard it runs without idempotency (keys are ignored, each
// request runs in its own transaction): the mode the demo uses to show what
// goes wrong without idem.
package transfers

// Package idem makes retried writes safe.
//
// A network call can end in "don't know": the request may or may not have
// been applied. Clients must retry, and a retried write that is not
// idempotent runs twice. idem records a client-chosen idempotency key and the
// result of the work in the same database transaction as the work's own
// effect, replays the original result to retries, refuses a concurrent
// duplicate at once, rejects a reused key that comes with a different
// request, and lets keys expire.
//
// # The pieces
//
//   - [Guard] is the engine. [Guard.Do] runs a unit of work at most once per
//     (scope, key) and returns the recorded [Result] to every retry.
//   - [Call] runs any function once per (scope, key) and returns its typed
//     result, recorded as JSON; [InputFingerprint] fingerprints its input.
//   - [Store] is the contract a storage backend keeps. The sqlitestore and
//     pgstore packages implement it; memstore is an in-memory reference for
//     tests; storetest is the conformance suite all of them run.
//   - [ParseKey] and [ValidateKey] apply the key rules; [NewFingerprint]
//     turns a request into the fingerprint compared on every retry.
//   - [StoredScope] is the form under which a scope's records are stored:
//     any scope is accepted, and stores only ever see short, printable
//     values.
//   - [Sweeper] deletes expired records in bounded batches.
//
// # Atomic mode
//
// In atomic mode the key's claim, the caller's effect and the recorded result
// commit in one database transaction. The work passed to [Guard.Do] receives
// a context that carries that transaction; each store package offers a typed
// accessor (for example sqlitestore.TxFrom(ctx) returns the *sql.Tx). Nothing "in
// progress" is ever committed: a concurrent duplicate is detected by a lock
// that belongs to the transaction, so a crash frees the key at once and the
// retry runs the work again, safely.
//
// # Outcomes
//
// [Guard.Do] returns exactly one of:
//
//   - the work's result, executed now (replayed == false);
//   - the recorded result of an earlier execution (replayed == true);
//   - [ErrInFlight] (as an [*InFlightError] with a retry hint): another call
//     holds the key right now (with [Config.Wait] or [Request.Wait], after
//     waiting that long for it to end in vain);
//   - [ErrMismatch]: the key was used before with a different fingerprint;
//   - [ErrInvalidKey]: the key breaks the key rules;
//   - [ErrUnavailable]: the store failed; nothing was recorded;
//   - the work's own error: the transaction was rolled back and nothing was
//     recorded, so a retry runs the work again.
//
// A Guard gives two of these answers from memory, without a store call: a
// replay (or [ErrMismatch]) of a record it recently committed or read,
// from a cache bounded by [Config.ReplayCacheBytes] (the heap it takes)
// and never past the record's expiry, and [ErrInFlight] for a key it is
// running itself. Both are answers the store would give: a completed
// record is final until it expires, so the cache is right on any number
// of processes. [Guard.Stats] counts them, and [WithCallInfo] tells a
// caller which answer came from where.
//
// # When not to use it
//
// Where each occurrence must count (metering, audit trails of attempts,
// counters), collapsing two requests into one loses the data the system
// exists to keep. Do not put a key on such endpoints.
package idem

// Package transfers is the account-transfer service of the incident behind
// idem, as a real service: accounts with integer-cent balances and
// transfers between them, with POST /transfers protected by an
// Idempotency-Key.
//
// # API
//
//	PUT  /accounts/{id}   {"balance": <int>}      200 {"id","balance"}   (absolute: naturally idempotent)
//	GET  /accounts/{id}                           200 {"id","balance"}   404 problem+json
//	POST /transfers       {"from","to","amount"}  201 {"id","from","to","amount","created_at"}
//	GET  /transfers[?limit=N]                     200 {"transfers":[…],"count":N}, oldest first
//	GET  /healthz                                 200 ok
//
// POST /transfers requires an Idempotency-Key. An unknown account, a
// non-positive amount, a transfer to the same account, insufficient funds
// and a credit that would take a balance past the largest int64 are
// answered 422 (a final answer: recorded and replayed; every refusal is
// decided before the first write). Malformed JSON (400) and a body over
// 1 MiB (413) are refused before the idempotency layer and never recorded,
// so a corrected retry with the same key runs. A database failure is
// answered 503 with Retry-After: the transaction was rolled back and
// nothing was recorded, so the retry is safe. Authorization: Bearer <token>
// names the principal (demo authentication); keys are scoped per
// principal, and a request without the header is the anonymous principal.
//
// A transfer is one transaction: the debit, the credit, the transfer row and
// the idempotency record commit together. Balances never go negative (the
// debit is conditional and a CHECK constraint backs it) and money is
// conserved.
//
// The same service runs on SQLite (sqlitestore) and PostgreSQL (pgstore).
// With a nil Guard it runs without idempotency (keys are ignored, each
// request runs in its own transaction): the mode the demo uses to show what
// goes wrong without idem.
package transfers

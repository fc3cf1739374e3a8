// Package bench measures the transfers service with and without idem,
// through real HTTP on loopback, against the performance bars of
// docs/DESIGN.md:
//
//   - Overhead: POST /transfers with a fresh Idempotency-Key per request
//     against the same service with idempotency off (a nil Guard), on the
//     same database and pool, at each concurrency level. The two variants
//     run in alternating short rounds (A B B A …) so that noise on the
//     machine hits both alike. Bar on PostgreSQL, at 8 and 32 clients:
//     idem/plain ≥ 0.90.
//   - Replay: retries of completed keys against first executions, also in
//     alternating rounds, answered from the Guard's replay cache. Bar:
//     replay/first ≥ 5. The same through a Guard with its in-process
//     shortcuts off (replays from the store) is shown beside it.
//   - Duplicate storm: a number of storms, each of 100 requests with one
//     key released together from a barrier, alternating with storms of
//     100 plain reads (GET /accounts/{id}). Each storm must apply exactly
//     one transfer (checked on a balance) and answer every other request
//     409 or with a replay. Bar: p99 of those answers ≤ 1.5 × p99 of the
//     reads. Run three ways: through the service as it runs, through a
//     Guard with its shortcuts off, and, on PostgreSQL, split over two
//     server instances (each with its own store, pool and Guard) on one
//     database, where the bar is one effect per key.
//
// Throughput and latency are measured by the client, closed loop: each of
// c workers sends its next request as soon as the previous one is
// answered. Client and servers share the machine, so absolute figures are
// those of the whole loop; the ratios are what the bars judge.
//
// A missed bar is a measurement, not an error. Run returns an error when an
// invariant breaks: a storm with other than one effect or with an answer
// that is neither 409 nor a replay, a replay that differs from the
// original response, or a ledger whose transfers or balances do not match
// what the clients were told.
package bench

// Package check is the engine behind idem check and idemtest: it audits
// one state-changing HTTP endpoint's duplicate path by sending it the
// requests a retrying client, a concurrent duplicate, a careless client
// and a second principal would send, and judging each answer by a rule.
//
// It has two front ends. The idem check command sends the requests over
// the network (ClientDoer); idemtest hands them to an http.Handler in the
// same process (HandlerDoer). Both call Run with an Endpoint and get a
// Report back. The package uses the standard library only.
//
// # Rules
//
//  1. Retry with the same key: the original status and body, byte for
//     byte, one effect, Idempotent-Replayed: true (WARN if absent).
//  2. Concurrent duplicates: Endpoint.Concurrency requests with one key,
//     released together: exactly one effect; the others answered 409 with
//     Retry-After (WARN if absent) or with the replay; no 5xx.
//  3. Same key, different body (one JSON member changed, or Endpoint.Body2):
//     422 (another 4xx is a WARN), no effect, no replay of the first result.
//  4. Same JSON, members reordered and whitespace changed: answered as an
//     identical retry is; a 4xx there is a WARN.
//  5. Missing key: 400, nothing done, unless Endpoint.KeyOptional.
//  6. Malformed keys (256 characters, two header lines, a list, non-ASCII):
//     400 each, nothing done.
//  7. Another principal, same key, same body (Endpoint.Principal2): its own
//     execution, never the first principal's recorded response.
//  8. No key at all, twice: whether the endpoint duplicates then, as
//     information (never a FAIL).
//
// # Effects
//
// An effect is one execution of the endpoint's work. With Endpoint.Effects
// the engine counts them before and after each rule. Without it, it infers
// executions from the answers: two 2xx answers with different bodies (or
// Location) are two executions, an identical one is a replay. Before the
// rules it sends the request twice under two fresh keys: if the two
// answers are identical, bodies do not tell executions apart, and only the
// Idempotent-Replayed header is left to go on; the verdicts that need more
// are WARN. The inference is weaker than a counter in any case: a server
// that answers a re-execution with the first body (read back from its
// database, say) looks like a replay.
package check

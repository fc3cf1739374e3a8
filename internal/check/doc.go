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
// A rule passes only on evidence that its property holds: when its
// baseline is broken (an identical retry that is refused, a first
// principal whose own retry is not replayed) it is SKIP or WARN and says
// why. Duplicate safety (effects) and replay fidelity (status, body, each
// header) are judged apart: another status or body is a FAIL, and one
// effect with a header that differs is a WARN whose reason starts
// "duplicate safe" and names the header with both values.
//
//  1. Retry with the same key: one effect; the original status and body,
//     byte for byte, its headers, Idempotent-Replayed: true (WARN if a
//     header differs or the mark is absent).
//  2. Concurrent duplicates: Endpoint.Concurrency requests with one key,
//     released together: exactly one effect; the others answered 409 with
//     Retry-After (WARN if absent) or with the replay (WARN if a header
//     differs); no 5xx.
//  3. Same key, different body (one JSON member changed, or Endpoint.Body2),
//     then the identical request: 422 (another 4xx is a WARN), no effect,
//     no replay of the first result; SKIP when the identical retry is
//     refused with the same status.
//  4. Same JSON, members reordered and whitespace changed: answered as an
//     identical retry is; a 4xx there is a WARN; SKIP when the identical
//     retry is refused.
//  5. Missing key: 400, nothing done, unless Endpoint.KeyOptional.
//  6. Keys outside idem's policy (256 characters, two header lines, a
//     list, non-ASCII): 400 each, nothing done; one accepted and kept
//     safe (its retry replayed) is a WARN; a second execution, a wrong
//     replay or a 5xx is a FAIL.
//  7. Another principal, same key, same body (Endpoint.Principal2): its own
//     execution, never the first principal's recorded response; the first
//     principal's retry after it gets its original answer byte for byte,
//     no new effect (WARN when its retry before was not replayed either).
//  8. No key at all, twice: whether the endpoint duplicates then (WARN);
//     a FAIL when they get another request's recorded result.
//
// Rules 5 and 8 send bodies of their own, so that no rule's request can
// match a record another rule made.
//
// # Effects
//
// An effect is one execution of the endpoint's work. With Endpoint.Effects
// the engine counts them before and after each rule. Without it, it infers
// executions from the answers: before the rules it sends the request twice
// under two fresh keys. If their status or body differ, an answer with the
// same status and body as another is a replay of it (a header that
// differs is a defect of fidelity) and an unmarked different one another
// execution; if only Location differs, only an identical answer (status,
// Location, body) is a replay; if they are identical, bodies do not tell
// executions apart, only the Idempotent-Replayed header is left to go on,
// and the verdicts that need more are WARN. The inference is weaker than a
// counter in any case: a server that answers a re-execution with the
// first body (read back from its database, say) looks like a replay.
package check

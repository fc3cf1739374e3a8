// Package history records what the clients of a chaos run saw, one
// operation per attempt (start, end, key, outcome, body digest), and
// checks the history for linearizability with porcupine against the model
// of one idempotency key (docs/DESIGN.md):
//
//   - a key starts absent; the first execution completes it with a result
//     (status and body digest), and every later answer of the key is a
//     replay equal to that result byte for byte: a second first execution,
//     or a replay that differs, is a violation;
//   - a 409 is legal only while another attempt of the key overlaps it in
//     time (the attempt holding the key);
//   - an attempt whose outcome the client never learnt (a timeout, a reset,
//     a killed server, a 5xx) may or may not have taken effect: it may be
//     linearized at any point after its start, and the later answers decide
//     which. A replay needs no execution the history shows: net/http
//     retries a request with an Idempotency-Key by itself, within one
//     round trip, when the connection broke after the server ran it.
//
// The history is partitioned by key. On a violation, [Require] fails the
// test and writes porcupine's HTML visualization of the history to a file
// it names. When porcupine's search times out (a storm of hundreds of
// overlapping attempts of one key), [Check] decides by a direct check of
// the same rules, which needs no search: a verdict every time.
package history

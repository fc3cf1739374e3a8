// Package idemclient carries out writes with one idempotency key per intent,
// so that retrying them is always safe.
//
// The incident behind idem was a client bug: the key was made in an HTTP
// interceptor, so every retry carried a new key and the server applied 89
// transfers twice. This package makes the right thing the easy thing: the
// key belongs to an [Intent], made once when the application decides to act
// (the user presses Confirm), and every attempt to carry it out reuses the
// intent's key and its exact request. Nothing that sees single attempts (a
// RoundTripper, an interceptor) makes keys.
//
// # Intents and the client
//
// [Client.NewIntent] makes an intent with a fresh key ([RandomKey], 128
// random bits, by default; [UUIDv7Key] or any generator through
// [Config.NewKey]). [Client.Do] sends it until it has a final answer,
// setting the Idempotency-Key header on every attempt (a bare token, or an
// RFC 8941 sf-string for a key that is not one). The loop runs above the
// *http.Client, so the RoundTripper sees single attempts, and each attempt
// reads the body from a fresh reader over the same bytes.
//
// # Retries
//
// Retried: network errors, attempts over [Config.AttemptTimeout], and the
// statuses in [Config.RetryStatuses] (409 in flight, 429, 502, 503, 504).
// Never retried: 400, 422 and every other 4xx, which are answers (or bugs to
// surface), returned as a [*ProblemError] with the RFC 9457 problem details;
// and a retried status that the server marks Idempotent-Replayed, which is
// a recorded answer. The delay between attempts is [Policy.Delay]: capped
// exponential backoff with full jitter, at least the server's Retry-After
// (seconds or HTTP-date) and at most [Config.MaxDelay]. The loop is bounded
// by [Config.MaxAttempts], [Config.MaxElapsed] and the context; when the
// budget runs out Do returns an [*ExhaustedError] wrapping the last error
// (a *ProblemError for a last 503), and the intent stays pending: its
// outcome is unknown, and only the same key can settle it.
//
// [Response.Replayed] reports whether the answer was replayed by the server
// from an earlier attempt. Either way the effect happened once.
//
// # Persisted intents
//
// With a [Journal] in [Config.Journal], Do saves the intent before its
// first attempt (and sends nothing if it cannot) and marks it resolved when
// it has a final answer: a status below 400 or a final 4xx. After a crash or
// a restart, [Client.Resume] carries out the pending intents with their
// original keys: the server replays what it already did and runs what it
// never received. [DirJournal] is a crash-safe implementation with one JSON
// file per intent, written by temp file, fsync and rename. Prune resolved
// intents with [Journal.Prune].
//
// An intent must not be sent after the server has forgotten its key (24
// hours by default on idem servers): it would run again. Do refuses intents
// older than [Config.MaxIntentAge] (12 hours by default) with
// [ErrIntentExpired] and leaves them pending for the application to
// reconcile.
package idemclient

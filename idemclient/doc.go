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
// [Client.NewIntent] makes an intent with a fresh key ([idem.RandomKey], 128
// random bits, by default; [idem.UUIDv7Key] or any generator through
// [Config.NewKey]). [Client.Do] sends it until it has a final answer,
// setting the Idempotency-Key header on every attempt (written by
// idem.FormatKey: a bare token when idem.ParseKey reads it back unchanged,
// an RFC 8941 sf-string otherwise). The loop runs above the *http.Client,
// so the RoundTripper sees single attempts, and each attempt reads the body
// from a fresh reader over the same bytes.
//
// # Retries and answers
//
// Retried: network errors, attempts over [Config.AttemptTimeout], and the
// statuses in [Config.RetryStatuses] (408, 409 in flight, 425, 429, 502,
// 503, 504). The delay between attempts is [Policy.Delay]: capped
// exponential backoff with full jitter, at least the server's Retry-After
// (seconds or HTTP-date) and at most [Config.MaxDelay]. The loop is bounded
// by [Config.MaxAttempts], [Config.MaxElapsed] and the context; when the
// budget runs out Do returns an [*ExhaustedError] wrapping the last error
// (a *ProblemError for a last 503).
//
// Only answers that settle the intent resolve it: a 2xx; a 303 to a write
// (the server processed it); a 3xx or 4xx the server marks
// Idempotent-Replayed (it recorded it); and a 4xx in [Config.FinalStatuses]
// (400, 404, 405, 413, 422), returned as a [*ProblemError] matching
// [ErrRejected]. Everything else leaves the intent pending, since it may
// come from a layer that ran nothing: 401 and 403 ([ErrAccessDenied]; fix
// the credentials and send the same intent again), other 4xx and 5xx, and
// redirects Do does not follow ([ErrRedirected]). Do follows a redirect
// only when it resends the intent unchanged: a 307 or 308 keeps the method,
// the body (replayed through GetBody) and the key, for at most
// [MaxRedirects] hops and never from https to http; a 301 or 302 to a
// write, which net/http would resend as a GET without its body, is not
// followed. This holds whatever CheckRedirect [Config.HTTPClient] has.
// In short: an intent is resolved exactly when Do returns nil or an error
// matching ErrRejected; otherwise only the same key can settle it.
//
// [Response.Replayed] reports whether the answer was replayed by the server
// from an earlier attempt. Either way the effect happened once.
//
// # Persisted intents
//
// With a [Journal] in [Config.Journal], Do saves the intent before its
// first attempt (and sends nothing if it cannot) and marks it resolved when
// it has an answer that settles it. After a crash or a restart,
// [Client.Resume] carries out the pending intents with their original
// keys: the server replays what it already did and runs what it never
// received. [DirJournal] is a crash-safe implementation with one JSON
// file per intent, written by temp file, fsync and rename; an unreadable
// file is reported without hiding the other intents. Prune resolved
// intents with [Journal.Prune].
//
// An intent must not be sent after the server has forgotten its key (24
// hours by default on idem servers): it would run again. Do refuses intents
// older than [Config.MaxIntentAge] (12 hours by default) with
// [ErrIntentExpired] and leaves them pending for the application to
// reconcile.
package idemclient

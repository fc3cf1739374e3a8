// Package idemhttp is idem's net/http middleware: it makes retried POST and
// PATCH requests safe with the Idempotency-Key header
// (draft-ietf-httpapi-idempotency-key-header), using only the standard
// library.
//
// Keys are scoped by the caller's principal, which the authentication
// middleware in front of idemhttp hands over with idem.WithPrincipal:
//
//	func authenticate(next http.Handler) http.Handler {
//		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//			user, err := checkToken(r) // your authentication
//			if err != nil {
//				http.Error(w, "unauthorized", http.StatusUnauthorized)
//				return
//			}
//			next.ServeHTTP(w, r.WithContext(idem.WithPrincipal(r.Context(), user.ID)))
//		})
//	}
//
//	guard, _ := idem.New(store, nil)
//	mw, _ := idemhttp.New(guard, nil)
//	mux.Handle("POST /transfers", mw.Handler(transfers))
//	http.ListenAndServe(addr, authenticate(mux))
//
// The middleware is a plain func(http.Handler) http.Handler, so it works
// with ServeMux, chi (r.Use(mw.Handler)), gorilla/mux and anything else
// built on net/http. Put authentication, rate limiting and request
// validation outside it: what they answer must never be recorded.
//
// # What happens to a request
//
// Requests whose method is not in Config.Methods (POST and PATCH by
// default) pass through untouched. A protected request goes through these
// steps, each of which may answer it:
//
//   - The key header is parsed with idem.ParseKey: an RFC 8941 sf-string
//     ("abc") or a bare token (abc), which name the same key, of 1 to 255
//     visible ASCII characters. A missing header is a 400 (or, on an
//     Optional route, runs the handler unprotected); an invalid value, a
//     list, or the header twice is a 400.
//   - The request takes one of Config.MaxConcurrent slots; with none free
//     it is a 503 with Retry-After, before its body is read.
//   - The body is read whole, up to Config.MaxRequestBody; a larger one is a
//     413 before any work. A body that does not arrive in time (a read
//     deadline, or the request context's deadline) is a 408.
//   - The scope (Config.Scope, by default the principal; see Scope below)
//     and the fingerprint (method, route, request target, configured
//     headers and body; JSON bodies in canonical form) are computed. A
//     request whose context has ended by then is a 408; otherwise
//     idem.Guard.Do is called.
//   - A live record with the same fingerprint is replayed: the original
//     status, recorded headers and body, byte for byte, plus
//     Idempotent-Replayed: true. A different fingerprint is a 422; nothing
//     runs and nothing is replayed.
//   - A key held by another request is a 409 with Retry-After, at once.
//   - Otherwise the handler runs inside the store's transaction, which it
//     reaches through the request context (sqlitestore.TxFrom,
//     pgstore.TxFrom, memstore.TxFrom). Its response is buffered. A 2xx,
//     3xx or 4xx is recorded in that transaction and committed with the
//     handler's effect, then sent. A 5xx rolls back, is not recorded, and
//     is sent as the handler wrote it. A panic rolls back and goes on up the
//     stack to net/http's recovery or yours. A response over
//     Config.MaxResponseBody rolls back and becomes a 500.
//   - A store failure is a 503 with Retry-After: the middleware fails
//     closed. A route made with RouteOptions.FailOpen runs the handler
//     unprotected instead, if the failure came before the handler ran.
//
// The middleware's own answers are RFC 9457 problem details
// (application/problem+json) whose type is one of the Problem constants.
//
// # Scope
//
// A key is scoped: the record is addressed by (scope, key), and one scope
// never receives another's recorded response. DefaultScope is the
// principal that authentication stored with idem.WithPrincipal: a user, client
// or tenant id, which stays the same when a token is refreshed. A
// protected request without one is refused with 500 no-principal (a
// server configuration error, logged once at Error level with the ways to
// fix it), never put in a shared scope. Config.Scope replaces
// DefaultScope; it sees the request with its body readable.
//
// Public endpoints can let callers without a principal share
// idem.AnonymousScope (Config.Anonymous, or RouteOptions.Anonymous per route).
// Such callers must use random keys: one who guesses or reuses another's
// key receives that caller's response. Gateways that cannot know the
// principal can hash the credentials with CredentialScope, at the cost its
// documentation describes.
//
// # Per-route policy
//
// Middleware.Handler requires a key; Middleware.Optional lets requests
// without one through unprotected; Middleware.Route takes RouteOptions for
// an optional key, failing open, anonymous callers, a record TTL of its
// own, or leased mode.
//
// # Leased routes
//
// Routes are atomic by default: the handler runs in the store's
// transaction. A handler whose effects live outside the store's database
// (a payment provider, another service) goes on a route made with
// RouteOptions.Leased and a Kind, served by Config.Leased (an
// *idem.Leased): the claim of the key commits first, with a lease that a
// heartbeat extends, and the handler finds its *idem.Run with idem.RunFrom
// to record steps (Run.Step, Run.LocalStep) and derive the keys it sends
// downstream (Run.DerivedKey). A 2xx, 3xx or 4xx completes the record and
// is replayed like an atomic route's. A 5xx is sent as it is and releases
// the claim with its steps kept, so that the retry resumes after the last
// step. A key under a live lease is a 409 whose Retry-After is what is
// left of the lease; a handler whose lease was taken over is answered 503
// lease-lost (idem.OutcomeLeaseLost). The request is stored with the claim,
// without its credentials, and the handler is registered with the Leased
// engine as kind "http:"+Kind, so that an idem.Completer can serve it
// again if its client abandons it. docs/HTTP.md, "Leased routes", says
// what is stored and what the completer's request lacks.
//
// # Recorded headers
//
// The client of the first execution receives every header the handler set.
// A replay receives only the headers named in Config.RecordHeaders (see
// DefaultRecordHeaders); Set-Cookie, Date, Content-Length and hop-by-hop
// headers are never recorded. Content-Length is always set from the body.
//
// # Streaming and connection takeover
//
// Nothing can reach the client before the response is recorded, so the
// ResponseWriter a protected handler receives buffers everything and
// implements neither http.Flusher nor http.Hijacker; through
// http.ResponseController, Flush and Hijack report http.ErrNotSupported
// (read and write deadlines still work). Informational (1xx) responses are
// dropped. Do not protect streaming endpoints; requests that pass through
// get the original ResponseWriter, with all its interfaces.
//
// # Observability
//
// Each protected request ends in one idem.Outcome. It is logged with slog at
// the outcome's level (idem.Outcome.Level: an ordinary request at Debug, so
// a server logging at Info writes no line per request), with idem.KeyHash
// of the key, never the key, and passed to Config.Observer as an idem.Event;
// package idemprom turns events into Prometheus metrics and idemotel into
// span events.
package idemhttp

package idemhttp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpwire"
)

// Config configures a Middleware. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Methods are the request methods the middleware protects; requests
	// with any other method pass through untouched. Defaults to POST and
	// PATCH.
	Methods []string

	// Header is the name of the request header that carries the key.
	// Defaults to "Idempotency-Key".
	Header string

	// Scope returns the scope a request's key belongs to: the
	// authenticated principal or tenant. The same key in two scopes names
	// two independent requests, and one scope never receives another's
	// recorded response, so the scope must differ whenever the caller's
	// identity differs. It runs after the body has been read, and the
	// request it receives has a readable Body holding the whole body.
	// idem.ErrNoPrincipal means the request has no principal (see Anonymous);
	// any other error answers the request with 500 and runs nothing.
	// Defaults to DefaultScope, the principal that authentication stored
	// with idem.WithPrincipal.
	Scope func(*http.Request) (string, error)

	// Anonymous lets requests without a principal (Scope returned
	// idem.ErrNoPrincipal) share idem.AnonymousScope on every route of the
	// middleware, instead of being refused with 500 no-principal. It is
	// meant for public endpoints, and it has a cost: anonymous callers
	// share one namespace of keys, so they must use random keys (a UUID),
	// since a caller who guesses or reuses another's key receives that
	// caller's recorded response. RouteOptions.Anonymous allows it on
	// some routes only. Defaults to false.
	Anonymous bool

	// Route names the operation a request addresses, for the fingerprint,
	// the log lines and the Observer. It must not vary between retries of
	// one request. Defaults to DefaultRoute: the ServeMux pattern when
	// there is one, otherwise the URL path.
	Route func(*http.Request) string

	// FingerprintHeaders are request headers whose values join the
	// fingerprint, so that a retry which changes one of them is refused
	// with 422. Defaults to none.
	FingerprintHeaders []string

	// JSONBodies compares every request body in its canonical JSON form
	// (member order and whitespace do not count), whatever its
	// Content-Type says. Set it when the handlers decode the body as JSON
	// regardless of the header, so that a client sending JSON as
	// text/plain or form data is not refused for reordering members. A
	// body that is not JSON is still compared byte for byte. Defaults to
	// false: only bodies whose Content-Type is application/json or ends in
	// +json are canonicalised.
	JSONBodies bool

	// RecordHeaders are the response headers recorded with the status and
	// body and sent again on replay; other headers reach the client of the
	// first execution only. Set-Cookie, Content-Length, Date and
	// hop-by-hop headers are never recorded and are rejected here.
	// Defaults to DefaultRecordHeaders.
	RecordHeaders []string

	// MaxRequestBody is the largest request body, in bytes, that a
	// protected request may carry; a larger one is refused with 413 before
	// any work. The whole body is read into memory to compute the
	// fingerprint. Defaults to 1 MiB.
	MaxRequestBody int64

	// MaxResponseBody is the largest response body, in bytes, that can be
	// recorded. A handler that writes more is rolled back and the client
	// receives 500. Defaults to 1 MiB.
	MaxResponseBody int64

	// MaxConcurrent bounds how many protected requests the middleware
	// serves at once, from the moment their key is parsed to their answer.
	// A request over the bound is answered 503 too-busy with Retry-After
	// before its body is read. The bound caps the memory of buffered
	// bodies and responses (MaxConcurrent × (MaxRequestBody +
	// MaxResponseBody) at worst) and the requests queued on the store. A
	// negative value means no bound. Defaults to DefaultMaxConcurrent
	// (256).
	MaxConcurrent int

	// UnavailableRetryAfter is the Retry-After hint sent with 503 when the
	// store is unavailable. It is rounded up to whole seconds. Defaults to
	// 5 seconds.
	UnavailableRetryAfter time.Duration

	// Logger receives one line per outcome of a protected request, at the
	// outcome's level (idem.Outcome.Level: executions, replays and a
	// client's retries or mistakes at Debug, what needs attention at Warn,
	// failures at Error); keys are never logged, only idem.KeyHash.
	// Defaults to slog.Default() at the time of each line.
	Logger *slog.Logger

	// Observer is told the outcome of every protected request as an
	// idem.Event whose Transport is idem.TransportHTTP, for metrics and
	// traces (packages idemprom and idemotel). Defaults to none.
	Observer idem.Observer

	// Leased is the leased-mode engine that serves the routes made with
	// RouteOptions.Leased (see docs/HTTP.md, "Leased routes"); the Guard
	// passed to New serves every other route. Defaults to nil: no route
	// may be leased.
	Leased *idem.Leased
}

// DefaultHeader is the default name of the key's request header.
const DefaultHeader = "Idempotency-Key"

// ReplayedHeader is the response header set to "true" on a replay.
const ReplayedHeader = "Idempotent-Replayed"

// Default size limits.
const (
	DefaultMaxRequestBody  = 1 << 20
	DefaultMaxResponseBody = 1 << 20
)

// DefaultUnavailableRetryAfter is the default Retry-After sent with 503
// when the store is unavailable.
const DefaultUnavailableRetryAfter = 5 * time.Second

// DefaultMaxConcurrent is the default bound on protected requests served at
// once. It is far above what a store's connection pool serves at once (so
// requests over it would only queue) and above the 100-request duplicate
// storms idem is measured with, and it caps the buffers of the default
// limits at 512 MiB in the worst case.
const DefaultMaxConcurrent = 256

// busyRetryAfter is the Retry-After sent with 503 too-busy: a slot is
// usually free again within a request's duration.
const busyRetryAfter = time.Second

// DefaultRecordHeaders returns the response headers recorded by default:
// those that describe the body or the created resource.
func DefaultRecordHeaders() []string {
	return []string{
		"Cache-Control",
		"Content-Disposition",
		"Content-Encoding",
		"Content-Language",
		"Content-Location",
		"Content-Type",
		"ETag",
		"Expires",
		"Last-Modified",
		"Link",
		"Location",
		"Vary",
	}
}

// neverRecorded are response headers that must not be replayed: they carry
// per-response state (cookies, dates, lengths we compute) or belong to one
// connection (hop-by-hop).
var neverRecorded = []string{
	"Set-Cookie", "Set-Cookie2", "Content-Length", "Date",
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	ReplayedHeader,
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
		out.Methods = slices.Clone(c.Methods)
		out.FingerprintHeaders = slices.Clone(c.FingerprintHeaders)
		out.RecordHeaders = slices.Clone(c.RecordHeaders)
	}
	if out.Methods == nil {
		out.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if out.Header == "" {
		out.Header = DefaultHeader
	}
	if out.Scope == nil {
		out.Scope = DefaultScope
	}
	if out.Route == nil {
		out.Route = DefaultRoute
	}
	if out.RecordHeaders == nil {
		out.RecordHeaders = DefaultRecordHeaders()
	}
	if out.MaxRequestBody == 0 {
		out.MaxRequestBody = DefaultMaxRequestBody
	}
	if out.MaxResponseBody == 0 {
		out.MaxResponseBody = DefaultMaxResponseBody
	}
	if out.UnavailableRetryAfter == 0 {
		out.UnavailableRetryAfter = DefaultUnavailableRetryAfter
	}
	if out.MaxConcurrent == 0 {
		out.MaxConcurrent = DefaultMaxConcurrent
	}
	if err := out.validate(); err != nil {
		return Config{}, err
	}
	out.Header = http.CanonicalHeaderKey(out.Header)
	for i, h := range out.FingerprintHeaders {
		out.FingerprintHeaders[i] = http.CanonicalHeaderKey(h)
	}
	for i, h := range out.RecordHeaders {
		out.RecordHeaders[i] = http.CanonicalHeaderKey(h)
	}
	return out, nil
}

func (c *Config) validate() error {
	if len(c.Methods) == 0 {
		return errors.New("idemhttp: Config.Methods is empty; leave it nil for the default")
	}
	for _, m := range c.Methods {
		if !httpwire.IsToken(m) {
			return fmt.Errorf("idemhttp: Config.Methods: %q is not a method", m)
		}
	}
	if !httpwire.IsToken(c.Header) {
		return fmt.Errorf("idemhttp: Config.Header: %q is not a header name", c.Header)
	}
	for _, h := range c.FingerprintHeaders {
		if !httpwire.IsToken(h) {
			return fmt.Errorf("idemhttp: Config.FingerprintHeaders: %q is not a header name", h)
		}
	}
	for _, h := range c.RecordHeaders {
		if !httpwire.IsToken(h) {
			return fmt.Errorf("idemhttp: Config.RecordHeaders: %q is not a header name", h)
		}
		for _, n := range neverRecorded {
			if strings.EqualFold(h, n) {
				return fmt.Errorf("idemhttp: Config.RecordHeaders: %s must never be recorded", n)
			}
		}
	}
	if c.MaxRequestBody < 0 {
		return fmt.Errorf("idemhttp: Config.MaxRequestBody must not be negative, got %d", c.MaxRequestBody)
	}
	if c.MaxResponseBody < 0 {
		return fmt.Errorf("idemhttp: Config.MaxResponseBody must not be negative, got %d", c.MaxResponseBody)
	}
	if c.UnavailableRetryAfter < 0 {
		return fmt.Errorf("idemhttp: Config.UnavailableRetryAfter must not be negative, got %s", c.UnavailableRetryAfter)
	}
	return nil
}

// RouteOptions adjust the middleware for the routes it wraps; see
// Middleware.Route. The zero value is the default policy of
// Middleware.Handler.
type RouteOptions struct {
	// Optional lets a request without a key run the handler unprotected,
	// with the original ResponseWriter. A present but invalid key is still
	// refused with 400. Defaults to false: a missing key is refused with
	// 400.
	Optional bool

	// FailOpen runs the handler unprotected when the store is unavailable
	// before the work starts, instead of answering 503. Set it only where
	// a duplicate is harmless. Defaults to false (fail closed).
	FailOpen bool

	// Anonymous lets requests without a principal share idem.AnonymousScope on
	// these routes, as Config.Anonymous does for every route: anonymous
	// callers must then use random keys. Defaults to false: such requests
	// are refused with 500 no-principal, unless Config.Anonymous is set.
	Anonymous bool

	// TTL overrides the Guard's record lifetime for these routes (on a
	// leased route, the Leased engine's). Defaults to 0, meaning the
	// Guard's TTL (the Leased engine's).
	TTL time.Duration

	// Leased serves these routes in leased mode, with Config.Leased,
	// instead of in the store's transaction: for handlers whose effects
	// live outside the store's database (a payment provider, another
	// service). The claim of the key commits before the handler runs, with
	// a lease; the handler finds its *idem.Run with idem.RunFrom to record
	// steps and derive downstream keys; a 5xx releases the claim with its
	// steps kept, for a retry or the completer. See docs/HTTP.md, "Leased
	// routes". It cannot be combined with FailOpen. Defaults to false.
	Leased bool

	// Kind names a leased route's work for the completer: the handler is
	// registered with Config.Leased as kind "http:"+Kind, so that an
	// idem.Completer can re-serve a request its client abandoned. Each
	// Kind may be given to one handler only. Required when Leased is set,
	// and only then.
	Kind string

	// KeyFrom takes the key from another header or from a member of the
	// JSON body as well as from Config.Header, for clients that cannot send
	// that header; see KeySource. Defaults to the zero KeySource:
	// Config.Header only.
	KeyFrom KeySource

	// Wait lets a request whose key another request is running wait up to
	// this long for it to end, and then get its recorded answer as a
	// replay (marked with Idempotent-Replayed), instead of the 409
	// in-flight it gets at once by default; past the bound, or when its
	// client leaves, it gets that 409. If the running request records
	// nothing (a 5xx, rolled back), the waiter runs the handler itself,
	// never while the other runs. A waiting request keeps its
	// Config.MaxConcurrent slot. See idem.Config.Wait. It cannot be
	// combined with Leased. Defaults to 0: no wait.
	Wait time.Duration
	// OnMismatch, when set, answers a request whose key was used before
	// with another request, in place of the 422 key-reused problem: for
	// callers whose key is not the client's choice, such as a webhook's
	// delivery id (package idemwebhook answers 409 with it). Nothing runs,
	// nothing is replayed, and the outcome is still idem.OutcomeMismatch,
	// with the status OnMismatch wrote. Defaults to nil: the 422 problem.
	OnMismatch http.Handler
}

package idemhttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
)

// Outcome names what the middleware did with a protected request. Its
// values are stable: they are used as metric labels.
type Outcome string

// Outcomes of a protected request.
const (
	// OutcomeExecuted: the handler ran and its 2xx, 3xx or 4xx response
	// was recorded in the same transaction as its effect.
	OutcomeExecuted Outcome = "executed"
	// OutcomeReplayed: the recorded response of an earlier execution was
	// sent again.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeInFlight: another request held the key; 409 was sent.
	OutcomeInFlight Outcome = "in_flight"
	// OutcomeMismatch: the key was used before with another request; 422
	// was sent.
	OutcomeMismatch Outcome = "mismatch"
	// OutcomeInvalidKey: the key header was malformed or repeated; 400
	// was sent.
	OutcomeInvalidKey Outcome = "invalid_key"
	// OutcomeMissingKey: the route requires a key and there was none; 400
	// was sent.
	OutcomeMissingKey Outcome = "missing_key"
	// OutcomeUnavailable: the store failed; nothing was recorded and 503
	// was sent.
	OutcomeUnavailable Outcome = "unavailable"
	// OutcomeCanceled: the client went away (its request's context was
	// cancelled) before the store could answer; nothing was recorded, and
	// the answer (408 if it left before the store was asked, 503 if while
	// it was) reached nobody. It is kept apart from OutcomeUnavailable so
	// that clients hanging up do not look like a store failure.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeRequestTimeout: the request was not received in time (its
	// body read hit a deadline, or its context's deadline ran out before
	// the store was asked); 408 was sent and nothing ran.
	OutcomeRequestTimeout Outcome = "request_timeout"
	// OutcomeTooBusy: Config.MaxConcurrent requests were already being
	// served; 503 with Retry-After was sent before the body was read.
	OutcomeTooBusy Outcome = "too_busy"
	// OutcomeNoPrincipal: the request had no principal and its route does
	// not allow anonymous callers; 500 was sent and nothing ran.
	OutcomeNoPrincipal Outcome = "no_principal"
	// OutcomeTooLarge: the request body was over the limit; 413 was sent
	// before any work.
	OutcomeTooLarge Outcome = "too_large"
	// OutcomeResponseTooLarge: the handler's response was over the
	// recording limit; its effect was rolled back and 500 was sent.
	OutcomeResponseTooLarge Outcome = "response_too_large"
	// OutcomeRolledBack: the handler answered 5xx; its effect was rolled
	// back, nothing was recorded, and its response was sent.
	OutcomeRolledBack Outcome = "rolled_back"
	// OutcomePanic: the handler panicked; its effect was rolled back,
	// nothing was recorded, and the panic went on up the stack.
	OutcomePanic Outcome = "panic"
	// OutcomeUnprotected: the route's key is optional and the request had
	// none; the handler ran without protection.
	OutcomeUnprotected Outcome = "unprotected"
	// OutcomeFailOpen: the store was unavailable and the route fails open;
	// the handler ran without protection.
	OutcomeFailOpen Outcome = "fail_open"
	// OutcomeBadRequest: the request body could not be read; 400 was sent.
	OutcomeBadRequest Outcome = "bad_request"
	// OutcomeReleased: on a leased route, the handler answered 5xx (or
	// 408/499 once the request's context ended); its claim was released
	// with its recovery points kept, for a retry or the completer to
	// resume, and its response was sent. Effects outside the store that
	// the handler had already caused are not undone.
	OutcomeReleased Outcome = "released"
	// OutcomeLeaseLost: on a leased route, the handler's lease was taken
	// over while it ran (it outlived its lease: a stall, or heartbeats
	// that failed); its later writes were refused, nothing was recorded by
	// it, and 503 lease-lost with Retry-After was sent.
	OutcomeLeaseLost Outcome = "lease_lost"
	// OutcomeError: Config.Scope failed (other than with ErrNoPrincipal)
	// or the guard failed unexpectedly; 500 was sent and nothing ran.
	OutcomeError Outcome = "error"
)

// Outcomes returns every Outcome, for observers that pre-create one series
// per outcome.
func Outcomes() []Outcome {
	return []Outcome{
		OutcomeExecuted, OutcomeReplayed, OutcomeInFlight, OutcomeMismatch,
		OutcomeInvalidKey, OutcomeMissingKey, OutcomeUnavailable, OutcomeCanceled, OutcomeTooLarge,
		OutcomeResponseTooLarge, OutcomeRolledBack, OutcomePanic,
		OutcomeUnprotected, OutcomeFailOpen, OutcomeBadRequest, OutcomeError,
		OutcomeRequestTimeout, OutcomeTooBusy, OutcomeNoPrincipal,
		OutcomeReleased, OutcomeLeaseLost,
	}
}

// Event describes the outcome of one protected request.
type Event struct {
	// Outcome is what the middleware did.
	Outcome Outcome
	// Method is the request method. Package idemgrpc reports its calls
	// with Method "gRPC", the full method name as Route and the gRPC
	// status code as Status.
	Method string
	// Route is Config.Route's name for the request.
	Route string
	// Status is the status sent to the client; 0 after a panic, when
	// nothing was sent.
	Status int
	// Duration is the time from the request's arrival in the middleware
	// to its answer, the handler's run included.
	Duration time.Duration
	// KeyHash is KeyHash of the request's key, or "" when the request had
	// no valid key.
	KeyHash string
	// ReplayCache says whether the Guard answered from its replay cache
	// without a store call (idem.CacheHit: OutcomeReplayed or
	// OutcomeMismatch), looked there and went on to the store
	// (idem.CacheMiss), or did not look (empty: the cache is off, the
	// route is leased, or the request was answered before the Guard).
	ReplayCache idem.CacheUse
	// LocalInFlight is set on OutcomeInFlight when the Guard refused the
	// request because this process was running its key, without a store
	// call.
	LocalInFlight bool
}

// Observer is told the outcome of every protected request. Observe is
// called on the request's goroutine after the response has been written
// (before the panic goes on, for OutcomePanic); it must be safe for
// concurrent use and should return quickly.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// KeyHash returns the prefix of the key's SHA-256 that log lines carry in
// place of the key, so that operators can correlate lines without logs
// holding keys.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}

// outcomeLevel is the level of each outcome's log line: client mistakes and
// ordinary answers at Info (a plain execution at Debug), degradations at
// Warn, server faults at Error. A request refused for want of a principal
// is at Warn: the configuration error behind it is logged once at Error.
func outcomeLevel(o Outcome) slog.Level {
	switch o {
	case OutcomeExecuted, OutcomeUnprotected:
		return slog.LevelDebug
	case OutcomeFailOpen, OutcomeRolledBack, OutcomeReleased, OutcomeTooBusy, OutcomeNoPrincipal:
		return slog.LevelWarn
	case OutcomeUnavailable, OutcomeResponseTooLarge, OutcomePanic, OutcomeError, OutcomeLeaseLost:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// done logs the outcome and tells the observer.
func (c *call) done(o Outcome, status int, err error) {
	d := time.Since(c.start)
	ctx := c.r.Context()
	level := outcomeLevel(o)
	if logger := c.m.logger(); logger.Enabled(ctx, level) {
		attrs := []slog.Attr{
			slog.String("outcome", string(o)),
			slog.String("method", c.r.Method),
			slog.String("route", c.route),
		}
		if c.keyHash != "" {
			attrs = append(attrs, slog.String("key_sha256", c.keyHash))
		}
		if status != 0 {
			attrs = append(attrs, slog.Int("status", status))
		}
		attrs = append(attrs, slog.Duration("duration", d))
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		attrs = callInfoAttrs(attrs, c.info)
		logger.LogAttrs(ctx, level, "idemhttp: "+string(o), attrs...)
	}
	if c.m.cfg.Observer != nil {
		c.m.cfg.Observer.Observe(ctx, Event{Outcome: o, Method: c.r.Method, Route: c.route, Status: status, Duration: d, KeyHash: c.keyHash,
			ReplayCache: c.info.ReplayCache, LocalInFlight: c.info.LocalInFlight})
	}
}

// logger is Config.Logger, or slog.Default() at the time of the call.
func (m *Middleware) logger() *slog.Logger {
	if m.cfg.Logger != nil {
		return m.cfg.Logger
	}
	return slog.Default()
}

package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"
)

// Transport names the protocol a protected request came by. Its values are
// stable: they are used as metric labels and span attributes.
type Transport string

// Transports of the packages that protect requests.
const (
	// TransportHTTP: package idemhttp (and the adapters built on it).
	TransportHTTP Transport = "http"
	// TransportGRPC: package idemgrpc.
	TransportGRPC Transport = "grpc"
)

// Outcome names what a transport did with a protected request. Its values
// are stable: they are used as metric labels.
type Outcome string

// Outcomes of a protected request. The status each one sends is HTTP's;
// idemgrpc's doc gives the gRPC code of each.
const (
	// OutcomeExecuted: the handler ran and its final answer was recorded
	// in the same transaction as its effect.
	OutcomeExecuted Outcome = "executed"
	// OutcomeReplayed: the recorded answer of an earlier execution was
	// sent again.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeInFlight: another request held the key; 409 was sent.
	OutcomeInFlight Outcome = "in_flight"
	// OutcomeMismatch: the key was used before with another request; 422
	// was sent.
	OutcomeMismatch Outcome = "mismatch"
	// OutcomeInvalidKey: the key was malformed or repeated; 400 was sent.
	OutcomeInvalidKey Outcome = "invalid_key"
	// OutcomeMissingKey: the route requires a key and there was none; 400
	// was sent.
	OutcomeMissingKey Outcome = "missing_key"
	// OutcomeUnavailable: the store failed; nothing was recorded and 503
	// was sent.
	OutcomeUnavailable Outcome = "unavailable"
	// OutcomeCanceled: the client went away (its request's context was
	// cancelled) before the store could answer; nothing was recorded, and
	// the answer reached nobody. It is kept apart from OutcomeUnavailable
	// so that clients hanging up do not look like a store failure.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeRequestTimeout: the request was not received in time (its
	// body read hit a deadline, or its context's deadline ran out before
	// the store was asked); 408 was sent and nothing ran.
	OutcomeRequestTimeout Outcome = "request_timeout"
	// OutcomeTooBusy: the most requests allowed at once were already being
	// served; 503 with Retry-After was sent before the body was read.
	OutcomeTooBusy Outcome = "too_busy"
	// OutcomeNoPrincipal: the request had no principal and its route does
	// not allow anonymous callers; 500 was sent and nothing ran.
	OutcomeNoPrincipal Outcome = "no_principal"
	// OutcomeTooLarge: the request body was over the limit; 413 was sent
	// before any work.
	OutcomeTooLarge Outcome = "too_large"
	// OutcomeResponseTooLarge: the handler's answer was over the
	// recording limit; its effect was rolled back and 500 was sent.
	OutcomeResponseTooLarge Outcome = "response_too_large"
	// OutcomeRolledBack: the handler failed (a 5xx, or a gRPC code that is
	// not final); its effect was rolled back, nothing was recorded, and
	// its answer was sent.
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
	// OutcomeReleased: on a leased route, the handler failed; its claim
	// was released with its recovery points kept, for a retry or the
	// completer to resume, and its answer was sent. Effects outside the
	// store that the handler had already caused are not undone.
	OutcomeReleased Outcome = "released"
	// OutcomeLeaseLost: on a leased route, the handler's lease was taken
	// over while it ran (it outlived its lease); its later writes were
	// refused, nothing was recorded by it, and 503 lease-lost was sent.
	OutcomeLeaseLost Outcome = "lease_lost"
	// OutcomeError: the scope function failed (other than with
	// ErrNoPrincipal) or the guard failed unexpectedly; 500 was sent and
	// nothing ran.
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

// Level is the level at which the transports log the outcome: what every
// request ends in at Debug (executions, replays, a client's retry or
// mistake), what needs an operator's attention at Warn (a key reused with
// another request, a handler that failed, a refusal for load or for want
// of a principal, protection skipped), and the server's own failures at
// Error.
func (o Outcome) Level() slog.Level {
	switch o {
	case OutcomeMismatch, OutcomeFailOpen, OutcomeRolledBack, OutcomeReleased, OutcomeTooBusy, OutcomeNoPrincipal:
		return slog.LevelWarn
	case OutcomeUnavailable, OutcomeResponseTooLarge, OutcomePanic, OutcomeError, OutcomeLeaseLost:
		return slog.LevelError
	default:
		return slog.LevelDebug
	}
}

// Event describes the outcome of one protected request, whatever its
// transport.
type Event struct {
	// Transport is the protocol the request came by.
	Transport Transport
	// Outcome is what the transport did.
	Outcome Outcome
	// Method is the HTTP request method; empty for gRPC.
	Method string
	// Route names the operation: the HTTP route's name, or gRPC's full
	// method name ("/package.Service/Method").
	Route string
	// Status is the answer sent: the HTTP status, or the gRPC status
	// code. It is 0 after an HTTP panic, when nothing was sent.
	Status int
	// Duration is the time from the request's arrival in the transport to
	// its answer, the handler's run included.
	Duration time.Duration
	// KeyHash is KeyHash of the request's key, or "" when the request had
	// no valid key.
	KeyHash string
	// ReplayCache says whether the Guard answered from its replay cache
	// without a store call (CacheHit: OutcomeReplayed or
	// OutcomeMismatch), looked there and went on to the store
	// (CacheMiss), or did not look (empty).
	ReplayCache CacheUse
	// LocalInFlight is set on OutcomeInFlight when the Guard refused the
	// request because this process was running its key, without a store
	// call.
	LocalInFlight bool
}

// Observer is told the outcome of every protected request. Observe is
// called on the request's goroutine after the answer was written (before
// the panic goes on, for OutcomePanic); it must be safe for concurrent use
// and should return quickly. One Observer may serve every transport: the
// event says which one it came by.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// KeyHash returns the prefix of the SHA-256 of s (a key or a scope) that
// log lines, events and spans carry in its place, so that operators can
// correlate lines without logs holding keys or principals.
func KeyHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

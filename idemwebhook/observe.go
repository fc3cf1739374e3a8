package idemwebhook

import (
	"context"
	"time"
)

// Outcome names what a receiver did with a delivery. Its values are
// stable: they are used as metric labels.
type Outcome string

// Outcomes of a delivery.
const (
	// OutcomeRejected: refused before anything was recorded or run (see
	// Event.Reason).
	OutcomeRejected Outcome = "rejected"
	// OutcomeExecuted: verified, the handler ran and its answer was
	// recorded with its effect.
	OutcomeExecuted Outcome = "executed"
	// OutcomeReplayed: verified, and already processed: its recorded
	// answer was sent again.
	OutcomeReplayed Outcome = "replayed"
	// OutcomeConflicted: verified, but its delivery id was recorded with
	// another payload; 409 was sent and nothing ran.
	OutcomeConflicted Outcome = "conflicted"
	// OutcomeInFlight: verified, and the same delivery was being processed;
	// 409 with Retry-After was sent.
	OutcomeInFlight Outcome = "in_flight"
	// OutcomeRolledBack: verified, the handler answered 5xx; its effect was
	// rolled back, nothing recorded, and 503 sent.
	OutcomeRolledBack Outcome = "rolled_back"
	// OutcomeUnavailable: verified, the store failed; nothing was recorded
	// and 503 was sent.
	OutcomeUnavailable Outcome = "unavailable"
	// OutcomeError: verified, and anything else went wrong (see the log).
	OutcomeError Outcome = "error"
)

// Outcomes returns every Outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeRejected, OutcomeExecuted, OutcomeReplayed, OutcomeConflicted,
		OutcomeInFlight, OutcomeRolledBack, OutcomeUnavailable, OutcomeError}
}

// Event describes the outcome of one delivery.
type Event struct {
	Provider string
	Endpoint string
	Outcome  Outcome
	// Verified reports that the signature was checked and accepted: every
	// outcome but OutcomeRejected, and a rejection for a missing or
	// invalid delivery id.
	Verified bool
	// Reason is why it was refused, with OutcomeRejected only.
	Reason Reason
	// Status is the HTTP status sent (0 after a panic).
	Status int
	// Duration is from the delivery's arrival to its answer.
	Duration time.Duration
	// IDHash is idem.KeyHash of the delivery id, or "" before it is known.
	IDHash string
}

// Observer is told the outcome of every delivery, on the request's
// goroutine after the answer was written. It must be safe for concurrent
// use and return quickly.
type Observer interface {
	ObserveWebhook(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to the Observer interface.
type ObserverFunc func(ctx context.Context, e Event)

// ObserveWebhook calls f(ctx, e).
func (f ObserverFunc) ObserveWebhook(ctx context.Context, e Event) { f(ctx, e) }

package outbox

import (
	"context"
	"time"
)

// Source is a store's outbox as a Relay reads it. pgstore, pgstore/sqldb
// and sqlitestore each provide one (their Store.Outbox method). A Source
// is safe for concurrent use.
type Source interface {
	// Claim returns up to n committed messages that are neither sent nor
	// parked, in the order they were staged, and holds them for the
	// caller until the claim ends: while it is open, no other claim of
	// any relay returns them, nor any later message of the same
	// PartitionKey. A claim that is never finished (the process died)
	// gives its messages back. Claim may return an empty claim.
	Claim(ctx context.Context, n int) (Claim, error)

	// Backlog returns the messages not yet sent: how many are pending,
	// the staging time of the oldest, and how many are parked.
	Backlog(ctx context.Context) (Backlog, error)

	// Sweep deletes at most limit messages sent before before, and
	// returns how many it deleted. It never deletes a pending or parked
	// message.
	Sweep(ctx context.Context, before time.Time, limit int) (int, error)

	// Parked returns at most limit parked messages, oldest first.
	Parked(ctx context.Context, limit int) ([]ParkedMessage, error)

	// Unpark makes the parked message id pending again, its failures
	// forgotten, and reports whether there was such a parked message.
	Unpark(ctx context.Context, id string) (bool, error)
}

// Claim is one open claim of a Source.
type Claim interface {
	// Messages returns the claimed messages, in order.
	Messages() []Envelope
	// Finish records o and ends the claim: the messages of o.Sent are
	// marked sent at o.Now, each failure of o.Failed is counted (and
	// the message parked once it has o.MaxAttempts failures), and the
	// other messages stay pending. It returns the ids it parked. When
	// Finish fails, nothing of o is recorded.
	Finish(ctx context.Context, o *Outcome) (parked []string, err error)
	// Abort ends the claim and records nothing. It is safe after Finish.
	Abort(ctx context.Context) error
}

// Outcome is what a relay records at the end of a claim.
type Outcome struct {
	Now         time.Time
	Sent        []string  // ids the broker confirmed
	Failed      []Failure // refusals to count
	MaxAttempts int
}

// Failure is one refused publish.
type Failure struct {
	ID    string
	Error string
}

// Backlog is what a Source holds that is not sent.
type Backlog struct {
	Pending int64
	// OldestPending is when the oldest pending message was staged; zero
	// when none is pending.
	OldestPending time.Time
	Parked        int64
}

// ParkedMessage is a message the relay stopped publishing. Its Attempt
// is the number of refusals recorded for it.
type ParkedMessage struct {
	Envelope
	StagedAt  time.Time
	ParkedAt  time.Time
	LastError string
}

// Waiter is implemented by Sources that can wake a relay when messages
// are staged (pgstore, with LISTEN/NOTIFY). Wait returns when a message
// may have been committed since the previous call, when d has passed, or
// when ctx is done, whichever comes first. A Source without it is polled.
type Waiter interface {
	Wait(ctx context.Context, d time.Duration) error
}

package window

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Outcome is what Do did with a message, and so what the consumer does with
// it: Applied and Duplicate are acknowledged; Retry is delivered again
// later (nak, requeue). Its values are stable: they suit metric labels.
type Outcome string

// Outcomes of Do.
const (
	// Applied: the handler ran and succeeded, and the id was confirmed
	// (unless Do's error says the confirmation failed).
	Applied Outcome = "applied"
	// Duplicate: the id was confirmed within the window; the handler did
	// not run.
	Duplicate Outcome = "duplicate"
	// Retry: the handler failed (and the id was released), another
	// holder is processing the id, or the window could not answer.
	Retry Outcome = "retry"
)

// Settled reports whether the consumer should acknowledge the message.
func (o Outcome) Settled() bool { return o == Applied || o == Duplicate }

// ErrInProgress is Do's error when another holder's lease on the id is
// live: the message must be delivered again later, when that holder has
// confirmed it (a duplicate then) or released it.
var ErrInProgress = errors.New("window: id in progress elsewhere")

// Leaser is a Window that says how long its leases last. Both Windows of
// this module are Leasers.
type Leaser interface {
	Lease() time.Duration
}

// Do runs h for the message id under the two phases of w, so that the
// phases cannot be got wrong: it reserves id; runs h only if the
// reservation is new; confirms id when h returns nil; releases it when h
// fails or panics (the panic goes on). The Outcome says what to do with the
// message.
//
// When w is a Leaser, h's context ends when the lease does: past it,
// another consumer may reserve the id and run it too, so h should stop.
// Confirm and Release run even when ctx has ended meanwhile.
//
// The error is nil for Duplicate, and for Applied once the id is
// confirmed. Applied with an error means h succeeded but the id could not
// be confirmed (its lease expired and another holder took it, or the store
// failed): acknowledge the message anyway, since a redelivery would run h
// again, and log the error. With Retry, the error is h's, ErrInProgress,
// or the window's (ErrNoID: the message can never be checked; take it out
// of the flow).
func Do(ctx context.Context, w Window, id string, h func(ctx context.Context) error) (Outcome, error) {
	start := time.Now()
	r, err := w.Reserve(ctx, id)
	switch {
	case err != nil:
		return Retry, err
	case r.Status == Done:
		return Duplicate, nil
	case r.Status == InProgress:
		return Retry, ErrInProgress
	case r.Status != Reserved || r.Token == 0:
		return Retry, fmt.Errorf("window: Reserve(%q) answered %v with token %d", id, r.Status, r.Token)
	}
	if err := run(ctx, w, id, r.Token, start, h); err != nil {
		if rerr := w.Release(context.WithoutCancel(ctx), id, r.Token); rerr != nil && !errors.Is(rerr, ErrNotHeld) {
			err = errors.Join(err, fmt.Errorf("window: release %q: %w", id, rerr))
		}
		return Retry, err
	}
	if err := w.Confirm(context.WithoutCancel(ctx), id, r.Token); err != nil {
		return Applied, fmt.Errorf("window: %q applied but not confirmed: %w", id, err)
	}
	return Applied, nil
}

// run runs h under the lease's deadline, and releases id if h panics.
func run(ctx context.Context, w Window, id string, tok Token, start time.Time, h func(ctx context.Context) error) error {
	if l, ok := w.(Leaser); ok && l.Lease() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(l.Lease()))
		defer cancel()
	}
	done := false
	defer func() {
		if !done {
			_ = w.Release(context.WithoutCancel(ctx), id, tok)
		}
	}()
	err := h(ctx)
	done = true
	return err
}

package idem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Bounds of the polls of a waiting call (see Request.Wait) whose key is
// held by another process or Guard: the first poll comes after
// waitFirstPoll, each later one after twice the delay of the one before, at
// most waitMaxPoll, each less a random part of up to a quarter so that
// waiters do not poll in step.
const (
	waitFirstPoll = 5 * time.Millisecond
	waitMaxPoll   = 250 * time.Millisecond
)

// refusal is how the Guard itself refused a try of Do in flight.
type refusal struct {
	// released is closed when this Guard's own run of the key ends; nil
	// when another Guard or process holds it (or the claim was not asked
	// for a channel).
	released <-chan struct{}
}

// refusedIf returns a refusal if err is the Guard's in-flight answer.
func refusedIf(err error) *refusal {
	if isInFlight(err) {
		return &refusal{}
	}
	return nil
}

func isInFlight(err error) bool {
	var ife *InFlightError
	return errors.As(err, &ife)
}

// waitBound is how long a call may wait for a concurrent duplicate:
// Request.Wait when positive, none when negative, Config.Wait otherwise.
func (g *Guard) waitBound(req Request) time.Duration {
	switch {
	case req.Wait > 0:
		return req.Wait
	case req.Wait < 0:
		return 0
	}
	return g.cfg.Wait
}

// doWaiting runs tries of Do until one is not refused in flight, or until
// bound has passed (the last refusal is then the answer) or ctx has ended.
// A try after the holder's run ended is a retry like any other: it gets
// the recorded answer, or, if that run recorded nothing (its work failed
// and was rolled back), it runs the work itself, holding the key, so that
// two runs of the work never overlap.
//
// A run of this Guard wakes its waiters when it ends; a holder elsewhere
// is polled for, through the store, with a bounded backoff.
func (g *Guard) doWaiting(ctx context.Context, req Request, work Work, bound time.Duration) (Result, bool, error) {
	deadline := time.Now().Add(bound)
	poll := waitFirstPoll
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		res, replayed, refused, err := g.attempt(ctx, req, work, true)
		if refused == nil {
			return res, replayed, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return res, replayed, err
		}
		d := left
		if refused.released == nil {
			d = min(poll-rand.N(poll/4+1), left)
			poll = min(2*poll, waitMaxPoll)
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-refused.released:
		case <-timer.C:
		case <-ctx.Done():
			return Result{}, false, fmt.Errorf("%w; stopped waiting: %w", err, context.Cause(ctx))
		}
	}
}

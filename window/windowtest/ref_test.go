package windowtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/window"
)

// ref is a reference window: a map under one lock, as plain as can be, and
// broken one way when mut names a defect.
type ref struct {
	lease, window time.Duration
	now           func() time.Time
	mut           mutation

	mu   sync.Mutex
	ids  map[string]*refEntry
	next window.Token
}

type refEntry struct {
	tok   window.Token
	done  bool
	until time.Time
}

// mutation is one defect a window can have; the zero mutation is none.
type mutation string

const (
	intact                mutation = ""
	releaseAnyToken       mutation = "ReleaseAnyToken"       // Release frees a held id whatever the token
	confirmAnyToken       mutation = "ConfirmAnyToken"       // Confirm of a held id takes any token
	releaseConfirmed      mutation = "ReleaseConfirmed"      // Release by the owner frees a confirmed id
	leaseNeverExpires     mutation = "LeaseNeverExpires"     // a crashed holder's id stays in progress
	confirmKeepsLease     mutation = "ConfirmKeepsLease"     // Confirm does not extend to the window
	windowNeverExpires    mutation = "WindowNeverExpires"    // ids are never forgotten
	checkThenSet          mutation = "CheckThenSet"          // Reserve checks, lets go of the lock, then sets
	doneIsFree            mutation = "DoneIsFree"            // Reserve of a confirmed id reserves it again
	heldIsDone            mutation = "HeldIsDone"            // Reserve of a held id answers Done: an in-flight message is dropped
	lateConfirmDropped    mutation = "LateConfirmDropped"    // Confirm after the lease expired records nothing
	lateConfirmOverwrites mutation = "LateConfirmOverwrites" // a late Confirm marks done an id another holder has
	sameToken             mutation = "SameToken"             // every reservation gets token 1
	reconfirmFails        mutation = "ReconfirmFails"        // the owner's second Confirm fails
	batchChecksFirst      mutation = "BatchChecksFirst"      // ReserveBatch checks every id before reserving any
	batchKeepsPartial     mutation = "BatchKeepsPartial"     // ReserveBatch keeps what it reserved before an error
	emptyIDAccepted       mutation = "EmptyIDAccepted"       // an empty id is reserved like any other
	doSkipsRelease        mutation = "DoSkipsRelease"        // the failed handler's id is not released (Release does nothing)
)

func newRef(lease, win time.Duration, now func() time.Time, mut mutation) *ref {
	return &ref{lease: lease, window: win, now: now, mut: mut, ids: make(map[string]*refEntry)}
}

// live returns id's entry if it has not expired at now, after forgetting
// it if it has.
func (r *ref) live(id string, now time.Time) *refEntry {
	e := r.ids[id]
	if e == nil {
		return nil
	}
	never := (r.mut == leaseNeverExpires && !e.done) || (r.mut == windowNeverExpires && e.done)
	if !never && !now.Before(e.until) {
		delete(r.ids, id)
		return nil
	}
	return e
}

func (r *ref) token() window.Token {
	if r.mut == sameToken {
		return 1
	}
	r.next++
	return r.next
}

func (r *ref) Reserve(_ context.Context, id string) (window.Reservation, error) {
	if id == "" && r.mut != emptyIDAccepted {
		return window.Reservation{}, window.ErrNoID
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.live(id, now); e != nil {
		switch {
		case e.done && r.mut != doneIsFree:
			return window.Reservation{ID: id, Status: window.Done}, nil
		case !e.done && r.mut == heldIsDone:
			return window.Reservation{ID: id, Status: window.Done}, nil
		case !e.done:
			return window.Reservation{ID: id, Status: window.InProgress}, nil
		}
	}
	if r.mut == checkThenSet {
		r.mu.Unlock()
		time.Sleep(time.Millisecond)
		r.mu.Lock()
	}
	e := &refEntry{tok: r.token(), until: now.Add(r.lease)}
	r.ids[id] = e
	return window.Reservation{ID: id, Status: window.Reserved, Token: e.tok}, nil
}

func (r *ref) Confirm(_ context.Context, id string, tok window.Token) error {
	if id == "" && r.mut != emptyIDAccepted {
		return window.ErrNoID
	}
	if tok == 0 && r.mut != confirmAnyToken {
		return window.ErrNotHeld
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.live(id, now)
	switch {
	case e == nil && r.mut == lateConfirmDropped:
		return window.ErrNotHeld
	case e == nil:
		r.ids[id] = &refEntry{tok: tok, done: true, until: now.Add(r.window)}
		return nil
	case e.done && e.tok == tok && r.mut != reconfirmFails:
		return nil
	case e.done:
		return window.ErrNotHeld
	case e.tok != tok && r.mut != confirmAnyToken && r.mut != lateConfirmOverwrites:
		return window.ErrNotHeld
	}
	e.done = true
	if r.mut != confirmKeepsLease {
		e.until = now.Add(r.window)
	}
	return nil
}

func (r *ref) Release(_ context.Context, id string, tok window.Token) error {
	if id == "" && r.mut != emptyIDAccepted {
		return window.ErrNoID
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.live(id, now)
	switch {
	case r.mut == doSkipsRelease:
		return nil
	case e == nil:
		return window.ErrNotHeld
	case e.done && !(r.mut == releaseConfirmed && e.tok == tok):
		return window.ErrNotHeld
	case e.tok != tok && r.mut != releaseAnyToken:
		return window.ErrNotHeld
	}
	delete(r.ids, id)
	return nil
}

func (r *ref) ReserveBatch(ctx context.Context, ids []string) ([]window.Reservation, error) {
	rs := make([]window.Reservation, len(ids))
	if r.mut == batchChecksFirst {
		// Answer every id as the store stood before the batch.
		r.mu.Lock()
		now := r.now()
		free := make([]bool, len(ids))
		for i, id := range ids {
			free[i] = r.live(id, now) == nil
		}
		r.mu.Unlock()
		for i, id := range ids {
			if free[i] {
				r.mu.Lock()
				delete(r.ids, id)
				r.mu.Unlock()
			}
			res, err := r.Reserve(ctx, id)
			if err != nil {
				return nil, err
			}
			rs[i] = res
		}
		return rs, nil
	}
	for i, id := range ids {
		res, err := r.Reserve(ctx, id)
		if err != nil {
			if r.mut != batchKeepsPartial {
				_ = r.ReleaseBatch(ctx, rs[:i])
			}
			return nil, err
		}
		rs[i] = res
	}
	return rs, nil
}

func (r *ref) ConfirmBatch(ctx context.Context, rs []window.Reservation) error {
	return window.ConfirmAll(ctx, single{r}, rs)
}

func (r *ref) ReleaseBatch(ctx context.Context, rs []window.Reservation) error {
	return window.ReleaseAll(ctx, single{r}, rs)
}

// single hides a window's batch form, so that the window package's
// fallbacks run.
type single struct{ window.Window }

func refHarness(mut mutation) Harness {
	return Harness{
		New: func(t testing.TB, lease, win time.Duration) (window.Window, func(time.Duration)) {
			c := testclock.New()
			return newRef(lease, win, c.Now, mut), c.Advance
		},
		Exact: true,
	}
}

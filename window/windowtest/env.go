package windowtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem/window"
)

// Durations of the windows whose leases and windows the case does not let
// end: long enough that no stall of a loaded machine ends them.
const (
	longLease  = 5 * time.Minute
	longWindow = time.Hour
)

// env is one window of a case, and what the case knows of its clock.
type env struct {
	t       testing.TB
	h       *Harness
	w       window.Window
	advance func(time.Duration)
	lease   time.Duration
	window  time.Duration
	ctx     context.Context
}

// setup returns a window whose lease and window the case never lets end.
func setup(t testing.TB, h *Harness) *env {
	t.Helper()
	return newEnv(t, h, longLease, longWindow)
}

// setupShort returns a window whose lease and window the case lets end:
// on an exact clock as long as setup's, on real time Harness.Lease and
// three times that.
func setupShort(t testing.TB, h *Harness) *env {
	t.Helper()
	if h.Exact {
		return newEnv(t, h, longLease, longWindow)
	}
	lease := h.Lease
	if lease == 0 {
		lease = time.Second
	}
	return newEnv(t, h, lease, 3*lease)
}

func newEnv(t testing.TB, h *Harness, lease, win time.Duration) *env {
	t.Helper()
	w, advance := h.New(t, lease, win)
	if w == nil || advance == nil {
		t.Fatal("Harness.New returned a nil window or advance")
	}
	return &env{t: t, h: h, w: w, advance: advance, lease: lease, window: win, ctx: context.Background()}
}

// margin is how far past an end the case waits before it counts on the
// end: a nanosecond on an exact clock, half a lease on real time.
func (e *env) margin() time.Duration {
	if e.h.Exact {
		return time.Nanosecond
	}
	return e.lease / 2
}

// reserve reserves id and fails the case unless the answer is want.
func (e *env) reserve(id string, want window.Status) window.Reservation {
	e.t.Helper()
	r, err := e.w.Reserve(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Reserve(%q): %v", id, err)
	}
	checkReservation(e.t, id, r, want)
	return r
}

func checkReservation(t testing.TB, id string, r window.Reservation, want window.Status) {
	t.Helper()
	switch {
	case r.Status != want:
		t.Fatalf("Reserve(%q) = %v, want %v", id, r.Status, want)
	case r.ID != id:
		t.Fatalf("Reserve(%q) answered for id %q", id, r.ID)
	case want == window.Reserved && r.Token == 0:
		t.Fatalf("Reserve(%q) = Reserved with the zero token", id)
	case want != window.Reserved && r.Token != 0:
		t.Fatalf("Reserve(%q) = %v with token %d, want no token", id, r.Status, r.Token)
	}
}

func (e *env) confirm(id string, tok window.Token) {
	e.t.Helper()
	if err := e.w.Confirm(e.ctx, id, tok); err != nil {
		e.t.Fatalf("Confirm(%q, %d): %v", id, tok, err)
	}
}

func (e *env) release(id string, tok window.Token) {
	e.t.Helper()
	if err := e.w.Release(e.ctx, id, tok); err != nil {
		e.t.Fatalf("Release(%q, %d): %v", id, tok, err)
	}
}

// notHeld fails the case unless err is ErrNotHeld.
func notHeld(t testing.TB, op string, err error) {
	t.Helper()
	if !errors.Is(err, window.ErrNotHeld) {
		t.Fatalf("%s = %v, want ErrNotHeld", op, err)
	}
}

// batcher returns the window as a Batcher, or skips the case.
func (e *env) batcher() window.Batcher {
	e.t.Helper()
	b, ok := e.w.(window.Batcher)
	if !ok {
		e.t.Skip("the window is not a window.Batcher")
	}
	return b
}

// timely runs try, which lets time pass and then checks what must still
// be live, until a try's checks end within budget of real time after the
// point it marks: a stall of the machine past the budget could have ended
// what the checks count on, so their result would prove nothing. try
// observes and returns the check to run; it takes the attempt's number,
// to name fresh ids. On an exact clock only real time is irrelevant, and
// the first try counts.
func (e *env) timely(budget time.Duration, try func(attempt int, mark func()) (check func())) {
	e.t.Helper()
	const attempts = 5
	for a := range attempts {
		var marked time.Time
		check := try(a, func() { marked = time.Now() })
		if e.h.Exact || (!marked.IsZero() && time.Since(marked) < budget) {
			check()
			return
		}
		e.t.Logf("attempt %d: the machine stalled past the %v the checks had; trying again", a, budget)
	}
	e.t.Fatalf("the machine stalled past the time the checks had in %d attempts: raise Harness.Lease", attempts)
}

// id names a fresh id of the case.
func id(name string, n int) string { return fmt.Sprintf("%s-%d", name, n) }

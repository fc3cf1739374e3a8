package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/conformance"
)

// waitBound is the Wait of a waiter that must get the holder's answer: far
// longer than the holder runs, since the holder ends as soon as the waiter
// has been refused once.
const waitBound = 30 * time.Second

// refusalStore tells, on refused, each Begin refused in flight.
type refusalStore struct {
	idem.Store
	refused chan struct{}
}

func (s *refusalStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	rec, tx, err := s.Store.Begin(ctx, p)
	if errors.Is(err, idem.ErrInFlight) {
		select {
		case s.refused <- struct{}{}:
		default:
		}
	}
	return rec, tx, err
}

// waitEnv is a holder and a waiter on one store location, each with its
// own Guard (and, on a persistent store, its own handle on the store), as
// two processes would be.
type waitEnv struct {
	*env
	waiter  *idem.Guard
	refused chan struct{}
	// running counts the works running now; overlap is set if two ever
	// ran at once.
	running atomic.Int64
	overlap atomic.Bool
}

func setupWait(t testing.TB, h *Harness) *waitEnv {
	t.Helper()
	e := setup(t, h)
	s := e.store
	if h.Persistent {
		s = conformance.Open(t, h.Open, h.Close, e.location)
		t.Cleanup(func() { conformance.Close(t, h.Close, s) })
	}
	w := &waitEnv{env: e, refused: make(chan struct{}, 1)}
	g, err := idem.New(&refusalStore{Store: s, refused: w.refused}, &idem.Config{TTL: testTTL, Now: e.clock.Now, ReplayCacheBytes: -1, DisableLocalInFlight: true})
	if err != nil {
		t.Fatal(err)
	}
	w.waiter = g
	return w
}

// work writes the effect name, runs until gate returns, and returns res or
// the error gate returns.
func (w *waitEnv) work(runs *conformance.Counter, name string, res idem.Result, gate func() error) idem.Work {
	return func(ctx context.Context) (idem.Result, error) {
		runs.Add()
		if w.running.Add(1) > 1 {
			w.overlap.Store(true)
		}
		defer w.running.Add(-1)
		if err := w.h.Effect(ctx, name); err != nil {
			return idem.Result{}, err
		}
		if err := gate(); err != nil {
			return idem.Result{}, err
		}
		return res, nil
	}
}

// hold runs the holder's call in a goroutine, with a work that runs until
// release is closed and then returns the error end gives. It returns once
// the work has started, and the channel its answer comes on.
func (w *waitEnv) hold(t testing.TB, runs *conformance.Counter, release <-chan struct{}, end error) <-chan error {
	t.Helper()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := w.guard.Do(context.Background(), req("s", "wait", "fp"), w.work(runs, "wait", idem.Result{Status: 201, Body: []byte("holder")}, func() error {
			close(started)
			select {
			case <-release:
				return end
			case <-time.After(waitBound):
				return errors.New("never released")
			}
		}))
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the holder ended before its work started: %v", err)
	}
	return done
}

// waitFor runs the waiter's call with Wait bound in a goroutine.
func (w *waitEnv) waitFor(ctx context.Context, runs *conformance.Counter, bound time.Duration) <-chan waitAnswer {
	out := make(chan waitAnswer, 1)
	go func() {
		r := req("s", "wait", "fp")
		r.Wait = bound
		res, replayed, err := w.waiter.Do(ctx, r, w.work(runs, "wait", idem.Result{Status: 201, Body: []byte("waiter")}, func() error { return nil }))
		out <- waitAnswer{res, replayed, err}
	}()
	return out
}

type waitAnswer struct {
	res      idem.Result
	replayed bool
	err      error
}

// refusedOnce returns once the waiter has been refused by the store.
func (w *waitEnv) refusedOnce(t testing.TB, answers <-chan waitAnswer) {
	t.Helper()
	select {
	case <-w.refused:
	case a := <-answers:
		t.Fatalf("the waiter answered before the store refused it: replayed=%v err=%v", a.replayed, a.err)
	case <-time.After(waitBound):
		t.Fatal("the waiter never reached the store")
	}
}

func waiterGetsTheHolderAnswer(t testing.TB, h *Harness) {
	w := setupWait(t, h)
	var holderRuns, waiterRuns conformance.Counter
	release := make(chan struct{})
	held := w.hold(t, &holderRuns, release, nil)
	answers := w.waitFor(context.Background(), &waiterRuns, waitBound)
	w.refusedOnce(t, answers)
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
	a := <-answers
	if a.err != nil || !a.replayed || string(a.res.Body) != "holder" || a.res.Status != 201 {
		t.Fatalf("waiter: res=%+v replayed=%v err=%v, want a replay of the holder's 201 \"holder\"", a.res, a.replayed, a.err)
	}
	if n := waiterRuns.Get(); n != 0 {
		t.Fatalf("the waiter ran its work %d times, want 0", n)
	}
	if n := w.effects(t, "wait"); n != 1 {
		t.Fatalf("effects = %d, want 1", n)
	}
}

func waiterPastItsBoundIsRefused(t testing.TB, h *Harness) {
	w := setupWait(t, h)
	var holderRuns, waiterRuns conformance.Counter
	release := make(chan struct{})
	held := w.hold(t, &holderRuns, release, nil)
	a := <-w.waitFor(context.Background(), &waiterRuns, 20*time.Millisecond)
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
	var ife *idem.InFlightError
	if !errors.As(a.err, &ife) || a.replayed {
		t.Fatalf("waiter past its bound: replayed=%v err=%v, want ErrInFlight", a.replayed, a.err)
	}
	if n := waiterRuns.Get(); n != 0 {
		t.Fatalf("the waiter ran its work %d times, want 0", n)
	}
}

func waiterRunsAfterAFailedHolder(t testing.TB, h *Harness) {
	w := setupWait(t, h)
	var holderRuns, waiterRuns conformance.Counter
	release := make(chan struct{})
	failed := errors.New("holder failed")
	held := w.hold(t, &holderRuns, release, failed)
	answers := w.waitFor(context.Background(), &waiterRuns, waitBound)
	w.refusedOnce(t, answers)
	close(release)
	if err := <-held; !errors.Is(err, failed) {
		t.Fatalf("holder: %v, want its work's error", err)
	}
	a := <-answers
	if a.err != nil || a.replayed || string(a.res.Body) != "waiter" {
		t.Fatalf("waiter after a failed holder: res=%+v replayed=%v err=%v, want its own execution", a.res, a.replayed, a.err)
	}
	if n := waiterRuns.Get(); n != 1 {
		t.Fatalf("the waiter ran its work %d times, want 1", n)
	}
	if w.overlap.Load() {
		t.Fatal("the waiter's work ran while the holder's was running")
	}
	if n := w.effects(t, "wait"); n != 1 {
		t.Fatalf("effects = %d, want 1 (the holder's was rolled back)", n)
	}
}

func waiterStopsWhenItsContextEnds(t testing.TB, h *Harness) {
	w := setupWait(t, h)
	var holderRuns, waiterRuns conformance.Counter
	release := make(chan struct{})
	held := w.hold(t, &holderRuns, release, nil)
	ctx, cancel := context.WithCancel(context.Background())
	answers := w.waitFor(ctx, &waiterRuns, waitBound)
	w.refusedOnce(t, answers)
	cancel()
	a := <-answers
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("holder: %v", err)
	}
	if !errors.Is(a.err, idem.ErrInFlight) || !errors.Is(a.err, context.Canceled) || a.replayed {
		t.Fatalf("cancelled waiter: replayed=%v err=%v, want ErrInFlight and context.Canceled", a.replayed, a.err)
	}
	if n := waiterRuns.Get(); n != 0 {
		t.Fatalf("the waiter ran its work %d times, want 0", n)
	}
}

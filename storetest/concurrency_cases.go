package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/conformance"
)

// Callers is how many goroutines the duplicate storm uses.
const Callers = 50

func concurrentDuplicatesRunOnceAndAreRefusedAtOnce(t testing.TB, h *Harness) {
	// The work blocks until every other caller has been answered.
	e := setup(t, h)
	release := make(chan struct{})
	var once sync.Once
	runs := &conformance.Counter{}
	twice := make(chan struct{}) // closed when a second run starts
	want := idem.Result{Status: 201, Body: []byte("once")}
	work := func(ctx context.Context) (idem.Result, error) {
		if runs.Add() == 2 {
			close(twice)
		}
		if err := e.h.Effect(ctx, "storm"); err != nil {
			return idem.Result{}, err
		}
		<-release
		return want, nil
	}

	type answer struct {
		replayed bool
		err      error
	}
	answers := make(chan answer, Callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range Callers {
		wg.Go(func() {
			<-start
			_, replayed, err := e.guard.Do(context.Background(), req("s", "storm", "fp"), work)
			answers <- answer{replayed, err}
		})
	}
	close(start)

	// Collect Callers-1 answers while the work is blocked. None of them
	// can be a replay: the result does not exist yet.
	deadline := time.After(30 * time.Second)
	inFlight := 0
	for i := 0; i < Callers-1; i++ {
		select {
		case a := <-answers:
			var ife *idem.InFlightError
			switch {
			case errors.As(a.err, &ife):
				inFlight++
				if ife.RetryAfter <= 0 {
					t.Errorf("InFlightError.RetryAfter = %s, want > 0", ife.RetryAfter)
				}
			default:
				t.Errorf("answer while the work runs: replayed=%v err=%v, want ErrInFlight", a.replayed, a.err)
			}
		case <-twice:
			once.Do(func() { close(release) })
			wg.Wait()
			t.Fatalf("the work started a second time while its first run was still going: the key's lock did not exclude a duplicate")
		case <-deadline:
			once.Do(func() { close(release) })
			wg.Wait()
			t.Fatalf("only %d of %d duplicates were answered while the work ran: they waited instead of being refused", i, Callers-1)
		}
	}
	once.Do(func() { close(release) })
	wg.Wait()
	close(answers)
	last := <-answers
	if last.err != nil || last.replayed {
		t.Errorf("the executing caller: replayed=%v err=%v, want a fresh execution", last.replayed, last.err)
	}
	if inFlight != Callers-1 {
		t.Errorf("in-flight answers = %d, want %d", inFlight, Callers-1)
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("work ran %d times, want exactly 1", n)
	}
	if n := e.effects(t, "storm"); n != 1 {
		t.Errorf("effects = %d, want exactly 1", n)
	}
	got, replayed, err := e.guard.Do(context.Background(), req("s", "storm", "fp"), work)
	if err != nil || !replayed {
		t.Fatalf("retry after the storm: replayed=%v err=%v, want a replay", replayed, err)
	}
	assertResult(t, got, want)
}

func concurrentRetriesAfterCompletionAllReplay(t testing.TB, h *Harness) {
	e := setup(t, h)
	work, runs := e.work("replays", idem.Result{Status: 200, Body: []byte("r")})
	if _, _, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, Callers)
	for range Callers {
		wg.Go(func() {
			_, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work)
			if err == nil && !replayed {
				err = fmt.Errorf("not replayed")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent retry: %v", err)
		}
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("work ran %d times, want 1", n)
	}
}

func manyKeysConcurrentlyEachRunOnce(t testing.TB, h *Harness) {
	e := setup(t, h)
	const keys = 20
	var wg sync.WaitGroup
	errs := make(chan error, keys*2)
	for i := range keys {
		for range 2 {
			wg.Go(func() {
				key := fmt.Sprintf("key-%d", i)
				work, _ := e.work(key, idem.Result{Status: 201, Body: []byte(key)})
				for attempt := 0; attempt < 200; attempt++ {
					got, _, err := e.guard.Do(context.Background(), req("s", key, "fp"), work)
					if errors.Is(err, idem.ErrInFlight) {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					if err == nil && string(got.Body) != key {
						err = fmt.Errorf("%s: body %q", key, got.Body)
					}
					errs <- err
					return
				}
				errs <- fmt.Errorf("%s: still in flight after 200 attempts", key)
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i := range keys {
		if n := e.effects(t, fmt.Sprintf("key-%d", i)); n != 1 {
			t.Errorf("key-%d: effects = %d, want 1", i, n)
		}
	}
}

func workRunsOnceWhileRetriesRace(t testing.TB, h *Harness) {
	// Not even a second run whose effect would be rolled back is allowed:
	// a retry that arrives as the record commits is answered from it.
	e := setup(t, h)
	const rounds, callers = 40, 8
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		runs := &conformance.Counter{}
		work := func(ctx context.Context) (idem.Result, error) {
			runs.Add()
			if err := e.h.Effect(ctx, key); err != nil {
				return idem.Result{}, err
			}
			time.Sleep(time.Millisecond)
			return idem.Result{Status: 201, Body: []byte(key)}, nil
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, callers)
		for range callers {
			wg.Go(func() {
				<-start
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					got, _, err := e.guard.Do(context.Background(), req("s", key, "fp"), work)
					if errors.Is(err, idem.ErrInFlight) {
						runtime.Gosched() // retry at once: the race is the point
						continue
					}
					if err == nil && string(got.Body) != key {
						err = fmt.Errorf("%s: body %q", key, got.Body)
					}
					errs <- err
					return
				}
				errs <- fmt.Errorf("%s: still in flight after 10s", key)
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := runs.Get(); n != 1 {
			t.Fatalf("%s: the work ran %d times, want 1 (a retry that raced the commit ran it again)", key, n)
		}
		if n := e.effects(t, key); n != 1 {
			t.Fatalf("%s: effects = %d, want 1", key, n)
		}
	}
}

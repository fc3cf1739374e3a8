package windowtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/window"
)

func concurrentReserversOneWins(t testing.TB, h *Harness) {
	e := setup(t, h)
	const rounds, reservers = 10, 24
	for round := range rounds {
		key := id("a", round)
		rs := race(t, reservers, func() (window.Reservation, error) { return e.w.Reserve(e.ctx, key) })
		var winner window.Reservation
		winners := 0
		for _, r := range rs {
			switch r.Status {
			case window.Reserved:
				winners++
				winner = r
			case window.InProgress:
			default:
				t.Fatalf("a concurrent Reserve(%q) answered %v, want Reserved or InProgress", key, r.Status)
			}
		}
		if winners != 1 {
			t.Fatalf("%d of %d concurrent reservers of %q got Reserved, want exactly 1", winners, reservers, key)
		}
		e.confirm(key, winner.Token)
		for _, r := range race(t, reservers, func() (window.Reservation, error) { return e.w.Reserve(e.ctx, key) }) {
			if r.Status != window.Done {
				t.Fatalf("a Reserve(%q) after its Confirm answered %v, want Done", key, r.Status)
			}
		}
	}
}

// race runs f in n goroutines released at once and returns their answers;
// it fails the case on any error.
func race(t testing.TB, n int, f func() (window.Reservation, error)) []window.Reservation {
	t.Helper()
	start := make(chan struct{})
	out := make([]window.Reservation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = f()
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Reserve: %v", err)
	}
	return out
}

func concurrentDeliveriesApplyOnce(t testing.TB, h *Harness) {
	e := setup(t, h)
	const ids, workers, failures = 16, 6, 2
	type record struct {
		runs, applied, inflight, overlaps atomic.Int32
	}
	recs := make([]record, ids)
	handler := func(i int) func(context.Context) error {
		return func(context.Context) error {
			rec := &recs[i]
			if rec.inflight.Add(1) > 1 {
				rec.overlaps.Add(1)
			}
			defer rec.inflight.Add(-1)
			time.Sleep(100 * time.Microsecond) // let other deliveries meet this one
			if rec.runs.Add(1) <= failures {
				return errors.New("transient failure")
			}
			rec.applied.Add(1)
			return nil
		}
	}
	// Deliveries settle within milliseconds of each other; when none has
	// for stuckAfter, they never will.
	const stuckAfter = 5 * time.Second
	var progress atomic.Int64 // when a delivery last settled
	progress.Store(time.Now().UnixNano())
	ctx := context.Background()
	var unsettled atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for k := range ids {
				i := (k + w*3) % ids // each worker in its own order
				for {
					o, err := window.Do(ctx, e.w, id("m", i), handler(i))
					if o.Settled() {
						progress.Store(time.Now().UnixNano())
						break
					}
					if time.Since(time.Unix(0, progress.Load())) > stuckAfter {
						unsettled.Add(1)
						t.Errorf("no delivery settled for %v; %s's last: %v, %v", stuckAfter, id("m", i), o, err)
						return
					}
					time.Sleep(time.Millisecond) // redelivery
				}
			}
		})
	}
	wg.Wait()
	if unsettled.Load() > 0 {
		t.FailNow()
	}
	for i := range recs {
		rec := &recs[i]
		if n := rec.applied.Load(); n != 1 {
			t.Errorf("%s was applied %d times, want 1", id("m", i), n)
		}
		if n := rec.runs.Load(); n != failures+1 {
			t.Errorf("%s's handler ran %d times, want %d (%d failures, then one success)", id("m", i), n, failures+1, failures)
		}
		if n := rec.overlaps.Load(); n != 0 {
			t.Errorf("%s's handler ran while another of its runs was running, %d times", id("m", i), n)
		}
	}
}

package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func expiredRecordBehavesAsNew(t testing.TB, h *Harness) {
	// The clock is injected: nothing sleeps.
	e := setup(t, h)
	first, firstRuns := e.work("expiry", idem.Result{Status: 201, Body: []byte("first")})
	if _, _, err := e.guard.Do(context.Background(), req("s", "k", "fp-1"), first); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(testTTL - time.Nanosecond)
	if got, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp-1"), first); err != nil || !replayed || string(got.Body) != "first" {
		t.Fatalf("just before expiry: body=%q replayed=%v err=%v, want a replay", got.Body, replayed, err)
	}
	e.clock.Advance(time.Nanosecond)
	second, secondRuns := e.work("expiry", idem.Result{Status: 201, Body: []byte("second")})
	got, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp-2"), second)
	if err != nil || replayed || string(got.Body) != "second" {
		t.Fatalf("at expiry: body=%q replayed=%v err=%v, want a fresh execution", got.Body, replayed, err)
	}
	if a, b := firstRuns.Get(), secondRuns.Get(); a != 1 || b != 1 {
		t.Errorf("runs = %d, %d; want 1, 1", a, b)
	}
	if n := e.effects(t, "expiry"); n != 2 {
		t.Errorf("effects = %d, want 2", n)
	}
	if got, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp-2"), second); err != nil || !replayed || string(got.Body) != "second" {
		t.Errorf("retry of the new execution: body=%q replayed=%v err=%v, want a replay of the new record", got.Body, replayed, err)
	}
}

func requestTTLOverridesDefault(t testing.TB, h *Harness) {
	e := setup(t, h)
	work, runs := e.work("ttl", idem.Result{Status: 200})
	r := req("s", "k", "fp")
	r.TTL = time.Minute
	if _, _, err := e.guard.Do(context.Background(), r, work); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if _, replayed, err := e.guard.Do(context.Background(), r, work); err != nil || replayed {
		t.Fatalf("after the request's TTL: replayed=%v err=%v, want a fresh execution", replayed, err)
	}
	if n := runs.Get(); n != 2 {
		t.Errorf("runs = %d, want 2", n)
	}
}

func sweepDeletesOnlyExpiredRecords(t testing.TB, h *Harness) {
	e := setup(t, h)
	del, ok := e.store.(idem.ExpiredDeleter)
	if !ok {
		t.Skip("store does not implement idem.ExpiredDeleter")
	}
	const n = 25
	for i := range n {
		work, _ := e.work("sweep", idem.Result{Status: 200, Body: fmt.Appendf(nil, "%d", i)})
		if _, _, err := e.guard.Do(context.Background(), req("s", fmt.Sprintf("k%02d", i), "fp"), work); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
	}
	// Now keys k00..k09 are older than the TTL minus 15 minutes; move the
	// clock so that exactly the first 12 have expired.
	e.clock.Advance(testTTL - n*time.Minute + 11*time.Minute)
	// One batch deletes as many as its Limit allows: the Sweeper takes a
	// short batch to mean that none are left.
	first, err := del.DeleteExpired(context.Background(), &idem.DeleteExpiredParams{Now: e.clock.Now(), Limit: 5})
	if err != nil || first != 5 {
		t.Errorf("DeleteExpired with Limit 5 and 12 expired records = %d, %v; want 5", first, err)
	}
	// The sweeper's clock runs a minute ahead of the guard's, and its
	// Grace covers that skew: it deletes what has expired, and only that.
	ahead := func() time.Time { return e.clock.Now().Add(time.Minute) }
	sw, err := idem.NewSweeper(del, &idem.SweeperConfig{BatchSize: 5, Grace: time.Minute, Now: ahead})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if deleted+first != 12 {
		t.Errorf("DeleteExpired then Sweep deleted %d and %d, want 12 in all", first, deleted)
	}
	if again, err := sw.Sweep(context.Background()); err != nil || again != 0 {
		t.Errorf("second Sweep = %d, %v; want 0, nil", again, err)
	}
	for i := 12; i < n; i++ {
		work, runs := e.work("sweep", idem.Result{})
		got, replayed, err := e.guard.Do(context.Background(), req("s", fmt.Sprintf("k%02d", i), "fp"), work)
		if err != nil || !replayed || string(got.Body) != fmt.Sprint(i) || runs.Get() != 0 {
			t.Errorf("k%02d after sweep: body=%q replayed=%v err=%v, want its replay", i, got.Body, replayed, err)
		}
	}
	if in, ok := e.store.(idem.Inspector); ok {
		for i := range 12 {
			if _, err := in.Lookup(context.Background(), &idem.LookupParams{Scope: "s", Key: fmt.Sprintf("k%02d", i)}); err == nil {
				t.Errorf("k%02d: still stored after sweep", i)
			}
		}
	}
}

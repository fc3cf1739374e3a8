package leasetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// abandonedFixture writes, at the clock's time T (leases of one minute):
//
//   - "ended-1", "ended-2", "ended-3": pending, leases that end at T+1m,
//     T+3m and T+2m (heartbeats set the later ends);
//   - "released": pending, released until T+1m30s;
//   - "live": pending, its lease extended to T+1h;
//   - "retry-later": pending, released until T+1h;
//   - "completed", "completed-expired": completed records, the second
//     expired at T+1m.
//
// At T+5m the abandoned records, longest ended first, are ended-1,
// released, ended-3, ended-2.
func abandonedFixture(t testing.TB, e *env) (at time.Time, want []string) {
	t.Helper()
	ctx := context.Background()
	now := e.clock.Now()
	for _, k := range []string{"ended-1", "ended-2", "ended-3", "released", "live", "retry-later", "completed", "completed-expired"} {
		c := e.mustClaim(t, k, "fp", now)
		var err error
		switch k {
		case "ended-2":
			err = e.store.Heartbeat(ctx, &idem.HeartbeatParams{Lease: c.Lease, Now: now, Duration: 3 * time.Minute})
		case "ended-3":
			err = e.store.Heartbeat(ctx, &idem.HeartbeatParams{Lease: c.Lease, Now: now, Duration: 2 * time.Minute})
		case "live":
			err = e.store.Heartbeat(ctx, &idem.HeartbeatParams{Lease: c.Lease, Now: now, Duration: time.Hour})
		case "released":
			err = e.store.Release(ctx, &idem.ReleaseParams{Lease: c.Lease, Now: now, RetryAt: now.Add(90 * time.Second), Error: "failed"})
		case "retry-later":
			err = e.store.Release(ctx, &idem.ReleaseParams{Lease: c.Lease, Now: now, RetryAt: now.Add(time.Hour), Error: "failed"})
		case "completed":
			e.complete(t, c.Lease, testResult(), now, now.Add(time.Hour))
		case "completed-expired":
			e.complete(t, c.Lease, testResult(), now, now.Add(time.Minute))
		}
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	return now.Add(5 * time.Minute), []string{"ended-1", "released", "ended-3", "ended-2"}
}

func (e *env) abandoned(t testing.TB, now time.Time, limit int) []string {
	t.Helper()
	recs, err := e.store.Abandoned(context.Background(), &idem.AbandonedParams{Now: now, Limit: limit})
	if err != nil {
		t.Fatalf("Abandoned(%v, %d): %v", now, limit, err)
	}
	var keys []string
	for _, r := range recs {
		switch {
		case r == nil:
			t.Fatalf("Abandoned returned a nil record")
		case r.State != idem.StatePending || r.LeaseUntil.After(now):
			t.Errorf("Abandoned at %v returned %q: %s; want only pending records whose lease has ended", now, r.Key, describe(r))
		case r.Scope != scope || r.Fingerprint != "fp" || r.Kind != kind || string(r.Input) != string(input(r.Key)) || r.Token == 0:
			t.Errorf("Abandoned returned %q as %s: the record is incomplete (scope, fingerprint, kind, input and token are what a completer needs)", r.Key, describe(r))
		}
		keys = append(keys, r.Key)
	}
	return keys
}

func abandonedListsEndedLeasesLongestEndedFirst(t testing.TB, h *Harness) {
	e := setup(t, h)
	at, want := abandonedFixture(t, e)
	if got := e.abandoned(t, at, 100); !slices.Equal(got, want) {
		t.Errorf("Abandoned at T+5m = %q, want %q", got, want)
	}
	// At T+2m30s only the leases ended by then.
	if got, want := e.abandoned(t, e.clock.Now().Add(150*time.Second), 100), []string{"ended-1", "released", "ended-3"}; !slices.Equal(got, want) {
		t.Errorf("Abandoned at T+2m30s = %q, want %q", got, want)
	}
	if got := e.abandoned(t, e.clock.Now(), 100); len(got) != 0 {
		t.Errorf("Abandoned at T, while every lease is live = %q, want none", got)
	}
}

func abandonedHonoursItsLimit(t testing.TB, h *Harness) {
	e := setup(t, h)
	at, want := abandonedFixture(t, e)
	for _, limit := range []int{1, 2, 3} {
		if got := e.abandoned(t, at, limit); !slices.Equal(got, want[:limit]) {
			t.Errorf("Abandoned(limit %d) = %q, want %q", limit, got, want[:limit])
		}
	}
}

package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testclock"
)

// A call claimed with a 7-day TTL that the completer finishes is kept 7
// days, not the engine's 24 hours: a retry 48 hours later is replayed and
// the work does not run again (docs/DESIGN.md, records and leased mode).
func TestCompleterKeepsTheCallsTTL(t *testing.T) {
	t.Parallel()
	cs := setupCompleter(t) // LeasedConfig.TTL: the 24-hour default
	const week = 7 * 24 * time.Hour
	var runs atomic.Int32
	providerUp := false
	work := func(context.Context, *idem.Run) (idem.Result, error) {
		runs.Add(1)
		if !providerUp {
			return idem.Result{}, errors.New("provider: unknown outcome")
		}
		return idem.Result{Status: 201, Body: []byte("paid")}, nil
	}
	if err := cs.l.Register("payout", work); err != nil {
		t.Fatal(err)
	}
	req := leasedReq("k")
	req.Kind, req.TTL = "payout", week
	if _, _, err := cs.l.Do(context.Background(), req, work); err == nil {
		t.Fatal("first attempt did not fail")
	}
	if rec := lookup(t, cs.s, "k"); rec.TTL != week {
		t.Fatalf("pending record's TTL = %s, want the call's %s", rec.TTL, week)
	}
	providerUp = true
	if rep := cs.pass(t); rep.Completed != 1 {
		t.Fatalf("pass = %+v, want the record completed", rep)
	}
	completedAt := cs.clock.Now()
	if rec := lookup(t, cs.s, "k"); !rec.ExpiresAt.Equal(completedAt.Add(week)) {
		t.Errorf("completed record expires at %s, want %s (completion + the call's TTL, not the engine's 24 h)",
			rec.ExpiresAt, completedAt.Add(week))
	}

	cs.clock.Advance(48 * time.Hour)
	res, replayed, err := cs.l.Do(context.Background(), req, work)
	if err != nil || !replayed || string(res.Body) != "paid" {
		t.Fatalf("retry 48 h later: %q replayed %v err %v; want the completer's result replayed", res.Body, replayed, err)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the work ran %d times, want 2 (the failed attempt and the completer's)", n)
	}
}

// A retry that takes over a released call completes it with the TTL the
// call was claimed with, not its own.
func TestTakeoverKeepsTheCallsTTL(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	l, s := setupLeased(t, &idem.LeasedConfig{Now: clock.Now})
	const week = 7 * 24 * time.Hour
	first := leasedReq("k")
	first.TTL = week
	if _, _, err := l.Do(context.Background(), first, func(context.Context, *idem.Run) (idem.Result, error) {
		return idem.Result{}, errors.New("provider down")
	}); err == nil {
		t.Fatal("first attempt did not fail")
	}
	retry := leasedReq("k") // no TTL of its own: the engine's would be 24 h
	if _, replayed, err := l.Do(context.Background(), retry, func(context.Context, *idem.Run) (idem.Result, error) {
		return idem.Result{Status: 201}, nil
	}); err != nil || replayed {
		t.Fatalf("retry: replayed %v err %v; want an execution", replayed, err)
	}
	if rec := lookup(t, s, "k"); rec.TTL != week || !rec.ExpiresAt.Equal(clock.Now().Add(week)) {
		t.Errorf("record after the takeover: TTL %s, expires %s; want %s and %s", rec.TTL, rec.ExpiresAt, week, clock.Now().Add(week))
	}
}

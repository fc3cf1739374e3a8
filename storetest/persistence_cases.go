package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/crashchild"
)

const (
	crashChildEnv = "IDEM_STORETEST_CRASH_LOCATION"
	crashReady    = "storetest: effect written, waiting to be killed"
	crashKey      = "crash-key"
)

func recordSurvivesReopen(t testing.TB, h *Harness) {
	e := setup(t, h)
	want := idem.Result{Status: 201, Header: map[string][]string{"Location": {"/x/1"}}, Body: []byte("kept")}
	work, runs := e.work("reopen", want)
	if _, _, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work); err != nil {
		t.Fatal(err)
	}
	e.close(t)
	e.open(t)
	got, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work)
	if err != nil || !replayed {
		t.Fatalf("after reopen: replayed=%v err=%v, want a replay", replayed, err)
	}
	assertResult(t, got, want)
	if n := runs.Get(); n != 1 {
		t.Errorf("work ran %d times, want 1", n)
	}
	if n := e.effects(t, "reopen"); n != 1 {
		t.Errorf("effects = %d, want 1", n)
	}
}

func killedInsideWorkLeavesNeitherEffectNorKey(t testing.TB, h *Harness) {
	// The child writes its effect inside the work and is killed there.
	e := setup(t, h)
	// The child is the server meanwhile: a store may allow one writing
	// process per location (sqlitestore does), so this one steps aside
	// and re-opens after the kill, as a restarted server would.
	e.close(t)
	crashchild.Kill(t, []string{crashChildEnv + "=" + e.location}, crashReady)
	e.open(t)

	if n := e.effects(t, "crash"); n != 0 {
		t.Errorf("effects after the crash = %d, want 0", n)
	}
	assertNoRecord(t, e, "s", crashKey)

	work, runs := e.work("crash", idem.Result{Status: 201, Body: []byte("after crash")})
	// The server may take a moment to notice the dead connection and
	// release its lock; the key must come free, boundedly.
	var got idem.Result
	var replayed bool
	var err error
	for attempt := 0; ; attempt++ {
		got, replayed, err = e.guard.Do(context.Background(), req("s", crashKey, "fp"), work)
		if !errors.Is(err, idem.ErrInFlight) || attempt == 200 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || replayed || string(got.Body) != "after crash" {
		t.Fatalf("retry after the crash: body=%q replayed=%v err=%v, want a fresh execution", got.Body, replayed, err)
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("retry ran the work %d times, want 1", n)
	}
	if n := e.effects(t, "crash"); n != 1 {
		t.Errorf("effects after the retry = %d, want 1", n)
	}
}

// runCrashChild is the child side of the crash case: it opens the store,
// writes the effect inside the work, announces it and waits to be killed.
func runCrashChild(h *Harness, location string) {
	ctx := context.Background()
	s, err := h.Open(ctx, location)
	if err != nil {
		crashchild.Fail("storetest", "open:", err)
	}
	g, err := idem.New(s, nil)
	if err != nil {
		crashchild.Fail("storetest", err)
	}
	_, _, err = g.Do(ctx, req("s", crashKey, "fp"), func(ctx context.Context) (idem.Result, error) {
		if err := h.Effect(ctx, "crash"); err != nil {
			return idem.Result{}, err
		}
		crashchild.Ready("storetest", crashReady) // never returns
		return idem.Result{}, nil
	})
	crashchild.Fail("storetest", "Do returned:", err)
}

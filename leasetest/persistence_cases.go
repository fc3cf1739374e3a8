package leasetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/internal/crashchild"
)

const (
	crashChildEnv = "IDEM_LEASETEST_CRASH_LOCATION"
	crashReady    = "leasetest: step saved, waiting to be killed"
	crashKey      = "crash-key"
	// crashLease is the child's lease: the parent, whose clock runs
	// crashLease ahead, takes the key over at once without waiting.
	crashLease = time.Minute
)

func pendingRecordAndStepsSurviveReopen(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	pending := e.mustClaim(t, "pending", "fp", now)
	e.saveStep(t, pending.Lease, "a", allBytes(), now)
	e.saveStep(t, pending.Lease, "b", []byte("2"), now)
	done := e.mustClaim(t, "done", "fp", now)
	e.complete(t, done.Lease, testResult(), now, now.Add(time.Hour))

	e.close(t)
	e.open(t)

	sameRecord(t, "the pending record after a reopen", e.peek(t, "pending", now), pending.Record)
	e.mustNotClaim(t, "pending", "fp", now.Add(time.Second))
	taken := e.mustClaim(t, "pending", "fp", pending.Record.LeaseUntil)
	if taken.Record.Token <= pending.Record.Token || taken.Record.Attempts != 2 {
		t.Errorf("takeover after a reopen: token %d, attempts %d; want above %d and 2", taken.Record.Token, taken.Record.Attempts, pending.Record.Token)
	}
	sameSteps(t, "the steps after a reopen", taken.Steps, []idem.Step{{Name: "a", Output: allBytes()}, {Name: "b", Output: []byte("2")}})
	rec := e.mustNotClaim(t, "done", "fp", now.Add(time.Second))
	if rec.State != idem.StateCompleted || !sameResult(rec.Result, testResult()) {
		t.Errorf("the completed record after a reopen: %s, want it completed with its result", describe(rec))
	}
}

// crashRequest is the call the child makes and the parent resumes.
func crashRequest() idem.LeasedRequest {
	return idem.LeasedRequest{Scope: scope, Key: crashKey, Fingerprint: "fp", Kind: kind, Input: []byte("crash input")}
}

func killedHolderIsTakenOverFromItsLastStep(t testing.TB, h *Harness) {
	// The child claims the key, records a step (and a local step when the
	// store has them) and is killed; this process takes over.
	e := setup(t, h)
	// The child is the server meanwhile: a store may allow one writing
	// process per location, so this one steps aside and re-opens after
	// the kill, as a restarted server would.
	e.close(t)
	crashchild.Kill(t, []string{crashChildEnv + "=" + e.location}, crashReady)
	e.open(t)

	ctx := context.Background()
	steps := &conformance.Counter{}
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		one, err := run.Step(ctx, "one", func(context.Context) ([]byte, error) {
			steps.Add()
			return []byte("one again"), nil
		})
		if err != nil {
			return idem.Result{}, err
		}
		if string(one) != "one by the child" {
			return idem.Result{}, fmt.Errorf("step one's output = %q, want the child's", one)
		}
		if h.Effect != nil {
			if _, err := run.LocalStep(ctx, "local", func(ctx context.Context) ([]byte, error) {
				steps.Add()
				return []byte("local again"), h.Effect(ctx, "crash-local")
			}); err != nil {
				return idem.Result{}, err
			}
		}
		if run.Attempt != 2 || string(run.Input) != "crash input" {
			return idem.Result{}, fmt.Errorf("run: attempt %d, input %q; want 2 and the child's input", run.Attempt, run.Input)
		}
		return idem.Result{Status: 201, Body: []byte("resumed")}, nil
	}

	// The child's lease is live: the key is in flight.
	live, err := idem.NewLeased(e.store, &idem.LeasedConfig{Lease: crashLease})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = live.Do(ctx, crashRequest(), work)
	var ife *idem.InFlightError
	if !errors.As(err, &ife) {
		t.Fatalf("a call while the killed child's lease is live: err = %v, want an InFlightError", err)
	}

	// Past the lease (a clock ahead rather than a wait): taken over.
	later, err := idem.NewLeased(e.store, &idem.LeasedConfig{
		Lease: crashLease, Now: func() time.Time { return time.Now().Add(crashLease + time.Second) },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, replayed, err := later.Do(ctx, crashRequest(), work)
	if err != nil || replayed || string(res.Body) != "resumed" {
		t.Fatalf("the takeover after the lease: body %q, replayed %v, err %v; want a resumed execution", res.Body, replayed, err)
	}
	if n := steps.Get(); n != 0 {
		t.Errorf("%d steps the child had recorded ran again, want 0", n)
	}
	if h.Effect != nil {
		if n := e.effects(t, "crash-local"); n != 1 {
			t.Errorf("effects of the child's local step = %d, want 1", n)
		}
	}
	res, replayed, err = later.Do(ctx, crashRequest(), work)
	if err != nil || !replayed || string(res.Body) != "resumed" {
		t.Errorf("a retry after completion: body %q, replayed %v, err %v; want the replay", res.Body, replayed, err)
	}
}

// runCrashChild is the child side of the crash case: it opens the store,
// claims the key, records its steps, announces it and waits to be killed.
func runCrashChild(h *Harness, location string) {
	ctx := context.Background()
	s, err := h.Open(ctx, location)
	if err != nil {
		crashchild.Fail("leasetest", "open:", err)
	}
	l, err := idem.NewLeased(s, &idem.LeasedConfig{Lease: crashLease})
	if err != nil {
		crashchild.Fail("leasetest", err)
	}
	_, _, err = l.Do(ctx, crashRequest(), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		if _, err := run.Step(ctx, "one", func(context.Context) ([]byte, error) { return []byte("one by the child"), nil }); err != nil {
			return idem.Result{}, err
		}
		if h.Effect != nil {
			if _, err := run.LocalStep(ctx, "local", func(ctx context.Context) ([]byte, error) {
				return []byte("local by the child"), h.Effect(ctx, "crash-local")
			}); err != nil {
				return idem.Result{}, err
			}
		}
		crashchild.Ready("leasetest", crashReady) // never returns
		return idem.Result{}, nil
	})
	crashchild.Fail("leasetest", "Do returned:", err)
}

package leasetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/conformance"
)

// engineLease is the lease of the engine cases that run on the test
// clock: they move the clock past it rather than wait. Heartbeats, which
// run on real time, are set too far apart to fire during a case.
const engineLease = time.Hour

// waitBound bounds every wait of the engine cases for another goroutine.
const waitBound = 30 * time.Second

// leased returns an idem.Leased over the case's store on its clock.
func (e *env) leased(t testing.TB) *idem.Leased {
	t.Helper()
	l, err := idem.NewLeased(e.store, &idem.LeasedConfig{Lease: engineLease, Heartbeat: engineLease - time.Minute, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func leasedReq(key, fingerprint string) idem.LeasedRequest {
	return idem.LeasedRequest{Scope: scope, Key: key, Fingerprint: fingerprint, Kind: kind, Input: input(key)}
}

// wait receives from ch within waitBound, or fails the case.
func wait[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitBound):
		t.Fatalf("%s did not happen within %s", what, waitBound)
		panic("unreachable")
	}
}

type doAnswer struct {
	res      idem.Result
	replayed bool
	err      error
}

// goDo runs l.Do in a goroutine and returns the channel of its answer.
func goDo(l *idem.Leased, req idem.LeasedRequest, work idem.LeasedWork) <-chan doAnswer {
	ch := make(chan doAnswer, 1)
	go func() {
		res, replayed, err := l.Do(context.Background(), req, work)
		ch <- doAnswer{res, replayed, err}
	}()
	return ch
}

func engineReplaysACompletedCall(t testing.TB, h *Harness) {
	e := setup(t, h)
	l := e.leased(t)
	runs := &conformance.Counter{}
	work := func(context.Context, *idem.Run) (idem.Result, error) {
		runs.Add()
		return testResult(), nil
	}
	first, replayed, err := l.Do(context.Background(), leasedReq("k", "fp"), work)
	if err != nil || replayed || !sameResult(first, testResult()) {
		t.Fatalf("first Do: %d %q, replayed %v, err %v; want the work's result", first.Status, first.Body, replayed, err)
	}
	e.clock.Advance(engineLease + time.Minute) // a completed record is not a lease
	again, replayed, err := l.Do(context.Background(), leasedReq("k", "fp"), work)
	if err != nil || !replayed {
		t.Fatalf("retry: replayed %v, err %v; want a replay", replayed, err)
	}
	if !sameResult(again, testResult()) {
		t.Errorf("replay = %d %v %q, want %d %v %q byte for byte", again.Status, again.Header, again.Body, first.Status, first.Header, first.Body)
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("the work ran %d times, want 1", n)
	}
}

func engineRefusesAnotherFingerprint(t testing.TB, h *Harness) {
	e := setup(t, h)
	l := e.leased(t)
	runs := &conformance.Counter{}
	work := func(context.Context, *idem.Run) (idem.Result, error) {
		runs.Add()
		return idem.Result{Status: 201}, nil
	}
	// Pending under a live lease, then completed: another fingerprint is
	// refused either way.
	started, release := make(chan struct{}), make(chan struct{})
	first := goDo(l, leasedReq("k", "fp"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		close(started)
		<-release
		return work(ctx, run)
	})
	wait(t, started, "the first call's work starting")
	_, _, err := l.Do(context.Background(), leasedReq("k", "other"), work)
	close(release)
	if !errors.Is(err, idem.ErrMismatch) {
		t.Errorf("another fingerprint while the key is held: err = %v, want ErrMismatch", err)
	}
	if a := wait(t, first, "the first call's answer"); a.err != nil {
		t.Fatalf("first call: %v", a.err)
	}
	if _, _, err := l.Do(context.Background(), leasedReq("k", "other"), work); !errors.Is(err, idem.ErrMismatch) {
		t.Errorf("another fingerprint after completion: err = %v, want ErrMismatch", err)
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("the work ran %d times, want 1", n)
	}
}

func engineAnswersInFlightDuringALiveLease(t testing.TB, h *Harness) {
	e := setup(t, h)
	l := e.leased(t)
	runs := &conformance.Counter{}
	started, release := make(chan struct{}), make(chan struct{})
	first := goDo(l, leasedReq("k", "fp"), func(context.Context, *idem.Run) (idem.Result, error) {
		runs.Add()
		close(started)
		<-release
		return idem.Result{Status: 201, Body: []byte("first")}, nil
	})
	wait(t, started, "the first call's work starting")
	for _, elapsed := range []time.Duration{0, engineLease - 2*time.Second} {
		e.clock.Advance(elapsed)
		_, _, err := l.Do(context.Background(), leasedReq("k", "fp"), func(context.Context, *idem.Run) (idem.Result, error) {
			runs.Add()
			return idem.Result{}, nil
		})
		var ife *idem.InFlightError
		switch {
		case !errors.As(err, &ife):
			t.Errorf("a call during the live lease: err = %v, want an *InFlightError", err)
		case ife.RetryAfter < time.Second || ife.RetryAfter > engineLease:
			t.Errorf("RetryAfter = %s during a lease of %s, want at least 1s and at most the lease", ife.RetryAfter, engineLease)
		}
	}
	close(release)
	if a := wait(t, first, "the first call's answer"); a.err != nil || string(a.res.Body) != "first" {
		t.Fatalf("first call: body %q, err %v", a.res.Body, a.err)
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("the work ran %d times, want 1", n)
	}
}

func engineRunsConcurrentCallsOnce(t testing.TB, h *Harness) {
	// The work blocks until every other caller has been answered; each of
	// them must be in flight or, had the work finished, a replay.
	e := setup(t, h)
	l := e.leased(t)
	runs := &conformance.Counter{}
	answered := make(chan struct{}, Claimers)
	all := make(chan struct{})
	var once sync.Once
	work := func(context.Context, *idem.Run) (idem.Result, error) {
		if runs.Add() > 1 {
			once.Do(func() { close(all) }) // a second run: fail at once
		}
		select {
		case <-all:
		case <-time.After(waitBound):
		}
		return idem.Result{Status: 201, Body: []byte("once")}, nil
	}
	answers := make(chan doAnswer, Claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range Claimers {
		wg.Go(func() {
			<-start
			res, replayed, err := l.Do(context.Background(), leasedReq("k", "fp"), work)
			answers <- doAnswer{res, replayed, err}
			answered <- struct{}{}
		})
	}
	close(start)
	go func() {
		for range Claimers - 1 {
			<-answered
		}
		once.Do(func() { close(all) })
	}()
	wg.Wait()
	close(answers)
	executed := 0
	for a := range answers {
		var ife *idem.InFlightError
		switch {
		case a.err == nil && !a.replayed && string(a.res.Body) == "once":
			executed++
		case a.err == nil && a.replayed && string(a.res.Body) == "once":
		case errors.As(a.err, &ife):
		default:
			t.Errorf("a concurrent call: body %q, replayed %v, err %v; want the execution, a replay or in flight", a.res.Body, a.replayed, a.err)
		}
	}
	if n := runs.Get(); n != 1 || executed != 1 {
		t.Errorf("%d concurrent calls: the work ran %d times and %d calls returned its execution, want 1 and 1", Claimers, n, executed)
	}
	if _, replayed, err := l.Do(context.Background(), leasedReq("k", "fp"), work); err != nil || !replayed {
		t.Errorf("a call after the storm: replayed %v, err %v; want a replay", replayed, err)
	}
}

func engineResumesAfterAFailedAttempt(t testing.TB, h *Harness) {
	e := setup(t, h)
	l := e.leased(t)
	stepA, stepB := &conformance.Counter{}, &conformance.Counter{}
	errDown := errors.New("provider down")
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		a, err := run.Step(ctx, "a", func(context.Context) ([]byte, error) {
			return fmt.Appendf(nil, "a%d", stepA.Add()), nil
		})
		if err != nil {
			return idem.Result{}, err
		}
		b, err := run.Step(ctx, "b", func(context.Context) ([]byte, error) {
			if stepB.Add() == 1 {
				return nil, errDown
			}
			return []byte("b"), nil
		})
		if err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 201, Body: fmt.Appendf(nil, "%s %s attempt %d", a, b, run.Attempt)}, nil
	}
	if _, _, err := l.Do(context.Background(), leasedReq("k", "fp"), work); !errors.Is(err, errDown) {
		t.Fatalf("first attempt: err = %v, want the work's error", err)
	}
	// The failed attempt released the record: the retry claims it at once.
	res, replayed, err := l.Do(context.Background(), leasedReq("k", "fp"), work)
	if err != nil || replayed {
		t.Fatalf("retry: replayed %v, err %v; want an execution", replayed, err)
	}
	if want := "a1 b attempt 2"; string(res.Body) != want {
		t.Errorf("result %q, want %q: the retry resumes after step a with its output", res.Body, want)
	}
	if n := stepA.Get(); n != 1 {
		t.Errorf("step a ran %d times, want 1", n)
	}
}

func engineFencesAStaleHolder(t testing.TB, h *Harness) {
	// A's work pauses; its lease ends and B takes the key over. A wakes:
	// its step and its result are refused. B fails; C resumes with A's
	// step from before the takeover and without A's late one.
	e := setup(t, h)
	l := e.leased(t)
	aPaused, aWake := make(chan struct{}), make(chan struct{})
	var lateStepErr error
	a := goDo(l, leasedReq("k", "fp"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		if _, err := run.Step(ctx, "early", func(context.Context) ([]byte, error) { return []byte("A"), nil }); err != nil {
			return idem.Result{}, err
		}
		close(aPaused)
		<-aWake
		_, lateStepErr = run.Step(ctx, "late", func(context.Context) ([]byte, error) { return []byte("A"), nil })
		return idem.Result{Status: 201, Body: []byte("A")}, nil // ignoring the refused step: its result must be refused too
	})
	wait(t, aPaused, "A's work pausing")

	e.clock.Advance(engineLease)
	bHolds, bFail := make(chan struct{}), make(chan struct{})
	errB := errors.New("the second holder gives up")
	b := goDo(l, leasedReq("k", "fp"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		close(bHolds)
		<-bFail
		return idem.Result{}, errB
	})
	wait(t, bHolds, "B taking the key over")
	close(aWake)
	aAns := wait(t, a, "A's answer")
	if !errors.Is(lateStepErr, idem.ErrFenced) {
		t.Errorf("A's step after the takeover: err = %v, want ErrFenced", lateStepErr)
	}
	if !errors.Is(aAns.err, idem.ErrFenced) {
		t.Errorf("A's Do after the takeover: body %q, err %v; want ErrFenced", aAns.res.Body, aAns.err)
	}
	if rec := e.peek(t, "k", e.clock.Now()); rec.State != idem.StatePending || rec.Attempts != 2 {
		t.Errorf("the record after A's refused completion: %s, want B's pending claim", describe(rec))
	}
	close(bFail)
	if ans := wait(t, b, "B's answer"); !errors.Is(ans.err, errB) {
		t.Fatalf("B: err = %v, want its work's error", ans.err)
	}

	res, replayed, err := l.Do(context.Background(), leasedReq("k", "fp"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		early, ok := run.Done("early")
		_, late := run.Done("late")
		return idem.Result{Status: 201, Body: fmt.Appendf(nil, "C early=%q(%v) late=%v", early, ok, late)}, nil
	})
	if want := `C early="A"(true) late=false`; err != nil || replayed || string(res.Body) != want {
		t.Errorf("C: body %q, replayed %v, err %v; want %q", res.Body, replayed, err, want)
	}
}

func engineHeartbeatStopsAFencedHolder(t testing.TB, h *Harness) {
	// Real time: A's heartbeats keep its short lease alive until B, whose
	// clock is an hour ahead, takes the key over. A's next heartbeat is
	// refused and cancels its work with a cause matching ErrFenced.
	e := setup(t, h)
	a, err := idem.NewLeased(e.store, &idem.LeasedConfig{Lease: time.Second, Heartbeat: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b, err := idem.NewLeased(e.store, &idem.LeasedConfig{
		Lease: engineLease, Heartbeat: engineLease - time.Minute, Now: func() time.Time { return time.Now().Add(time.Hour) },
	})
	if err != nil {
		t.Fatal(err)
	}
	aRunning := make(chan struct{})
	var cause error
	aAns := goDo(a, leasedReq("k", "fp"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		if _, err := run.Step(ctx, "one", func(context.Context) ([]byte, error) { return []byte("A"), nil }); err != nil {
			return idem.Result{}, err
		}
		close(aRunning)
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
		case <-time.After(waitBound):
		}
		return idem.Result{Status: 201, Body: []byte("A")}, nil
	})
	wait(t, aRunning, "A's work running")
	aDone := make(chan struct{})
	bAns := goDo(b, leasedReq("k", "fp"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		<-aDone
		if out, ok := run.Done("one"); !ok || string(out) != "A" {
			return idem.Result{}, fmt.Errorf("the second holder: step one = %q, %v; want A's output", out, ok)
		}
		return idem.Result{Status: 201, Body: []byte("B")}, nil
	})
	ans := wait(t, aAns, "A's answer")
	close(aDone)
	if !errors.Is(cause, idem.ErrFenced) {
		t.Errorf("A's work context: cause %v, want a cancellation matching ErrFenced once its heartbeat is refused", cause)
	}
	if !errors.Is(ans.err, idem.ErrFenced) {
		t.Errorf("A's Do: body %q, err %v; want ErrFenced", ans.res.Body, ans.err)
	}
	if got := wait(t, bAns, "B's answer"); got.err != nil || string(got.res.Body) != "B" {
		t.Errorf("B: body %q, err %v; want B's result", got.res.Body, got.err)
	}
	res, replayed, err := b.Do(context.Background(), leasedReq("k", "fp"), func(context.Context, *idem.Run) (idem.Result, error) {
		return idem.Result{}, errors.New("must not run")
	})
	if err != nil || !replayed || string(res.Body) != "B" {
		t.Errorf("a retry: body %q, replayed %v, err %v; want B's result replayed", res.Body, replayed, err)
	}
}

func engineLocalStepsCommitWithTheirEffects(t testing.TB, h *Harness) {
	e := setup(t, h)
	e.txStore(t)
	l := e.leased(t)
	debits, refused := &conformance.Counter{}, &conformance.Counter{}
	errDecline := errors.New("declined for now")
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		if _, err := run.LocalStep(ctx, "debit", func(ctx context.Context) ([]byte, error) {
			debits.Add()
			return []byte("debited"), e.h.Effect(ctx, "debit")
		}); err != nil {
			return idem.Result{}, err
		}
		// A local step whose fn fails after its write: rolled back.
		if _, err := run.LocalStep(ctx, "credit", func(ctx context.Context) ([]byte, error) {
			if err := e.h.Effect(ctx, "credit"); err != nil {
				return nil, err
			}
			if refused.Add() == 1 {
				return nil, errDecline
			}
			return []byte("credited"), nil
		}); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 201}, nil
	}
	if _, _, err := l.Do(context.Background(), leasedReq("k", "fp"), work); !errors.Is(err, errDecline) {
		t.Fatalf("first attempt: err = %v, want the step's error", err)
	}
	if n, m := e.effects(t, "debit"), e.effects(t, "credit"); n != 1 || m != 0 {
		t.Errorf("after the first attempt: debit effects %d, credit effects %d; want 1 (committed step) and 0 (failed step)", n, m)
	}
	if _, _, err := l.Do(context.Background(), leasedReq("k", "fp"), work); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n, m := e.effects(t, "debit"), e.effects(t, "credit"); n != 1 || m != 1 || debits.Get() != 1 {
		t.Errorf("after the retry: debit effects %d (step ran %d times), credit effects %d; want 1 (1) and 1", n, debits.Get(), m)
	}
}

func completerFinishesAbandonedWork(t testing.TB, h *Harness) {
	e := setup(t, h)
	l := e.leased(t)
	steps := &conformance.Counter{}
	failFirst := &conformance.Counter{}
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		a, err := run.Step(ctx, "a", func(context.Context) ([]byte, error) {
			steps.Add()
			return []byte("a"), nil
		})
		if err != nil {
			return idem.Result{}, err
		}
		if failFirst.Add() == 1 {
			return idem.Result{}, errors.New("the client's attempt fails")
		}
		return idem.Result{Status: 201, Body: fmt.Appendf(nil, "%s from %s, attempt %d", a, run.Input, run.Attempt)}, nil
	}
	if err := l.Register(kind, work); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Do(context.Background(), leasedReq("k", "fp"), work); err == nil {
		t.Fatal("the first attempt succeeded; it was meant to fail")
	}
	// Not abandoned: a live lease, and a completed record.
	e.mustClaim(t, "live", "fp", e.clock.Now())
	if _, _, err := l.Do(context.Background(), leasedReq("done", "fp"), func(context.Context, *idem.Run) (idem.Result, error) {
		return idem.Result{Status: 200}, nil
	}); err != nil {
		t.Fatal(err)
	}

	c, err := idem.NewCompleter(l, &idem.CompleterConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if rep.Found != 1 || rep.Completed != 1 {
		t.Errorf("completer report %+v, want the one abandoned record found and completed", rep)
	}
	want := "a from " + string(input("k")) + ", attempt 2"
	res, replayed, err := l.Do(context.Background(), leasedReq("k", "fp"), work)
	if err != nil || !replayed || string(res.Body) != want {
		t.Errorf("the client's retry: body %q, replayed %v, err %v; want %q replayed", res.Body, replayed, err, want)
	}
	if n := steps.Get(); n != 1 {
		t.Errorf("step a ran %d times, want 1: the completer resumes after it", n)
	}
	if rep, err := c.RunOnce(context.Background()); err != nil || rep.Found != 0 {
		t.Errorf("a second pass: %+v, %v; want nothing left", rep, err)
	}
}

func completerCompletesWithTheCallsTTL(t testing.TB, h *Harness) {
	// The engine's TTL is the 24-hour default; each call asks for a week.
	e := setup(t, h)
	l := e.leased(t)
	runs := &conformance.Counter{}
	work := func(context.Context, *idem.Run) (idem.Result, error) {
		if runs.Add() == 1 {
			return idem.Result{}, errors.New("the client's attempt fails")
		}
		return idem.Result{Status: 201, Body: []byte("done")}, nil
	}
	if err := l.Register(kind, work); err != nil {
		t.Fatal(err)
	}
	req := leasedReq("k", "fp")
	req.TTL = callTTL
	if _, _, err := l.Do(context.Background(), req, work); err == nil {
		t.Fatal("the first attempt succeeded; it was meant to fail")
	}
	c, err := idem.NewCompleter(l, &idem.CompleterConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := c.RunOnce(context.Background()); err != nil || rep.Completed != 1 {
		t.Fatalf("RunOnce = %+v, %v; want the abandoned record completed", rep, err)
	}
	if rec := e.peek(t, "k", e.clock.Now()); rec.State != idem.StateCompleted || !rec.ExpiresAt.Equal(e.clock.Now().Add(callTTL)) {
		t.Errorf("the record the completer finished: %s; want completed, expiring at %v (completion + the call's TTL %s, not the engine's)",
			describe(rec), e.clock.Now().Add(callTTL), callTTL)
	}
	e.clock.Advance(48 * time.Hour) // past the engine's TTL, within the call's
	if res, replayed, err := l.Do(context.Background(), req, work); err != nil || !replayed || string(res.Body) != "done" {
		t.Errorf("a retry 48 h later: body %q, replayed %v, err %v; want the completer's result replayed", res.Body, replayed, err)
	}
	if n := runs.Get(); n != 2 {
		t.Errorf("the work ran %d times, want 2 (the failed attempt and the completer's)", n)
	}

	// A retry without a TTL of its own that takes the call over completes
	// it with the call's TTL too.
	runs = &conformance.Counter{}
	req = leasedReq("t", "fp")
	req.TTL = callTTL
	if _, _, err := l.Do(context.Background(), req, work); err == nil {
		t.Fatal("the first attempt of t succeeded; it was meant to fail")
	}
	if _, replayed, err := l.Do(context.Background(), leasedReq("t", "fp"), work); err != nil || replayed {
		t.Fatalf("the retry that takes t over: replayed %v, err %v; want an execution", replayed, err)
	}
	if rec := e.peek(t, "t", e.clock.Now()); rec.State != idem.StateCompleted || !rec.ExpiresAt.Equal(e.clock.Now().Add(callTTL)) {
		t.Errorf("the record a takeover finished: %s; want completed, expiring at %v (the call's TTL %s)", describe(rec), e.clock.Now().Add(callTTL), callTTL)
	}
}

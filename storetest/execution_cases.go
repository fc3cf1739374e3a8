package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
)

func firstExecutionRunsOnceAndRecords(t testing.TB, h *Harness) {
	e := setup(t, h)
	want := idem.Result{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)}
	work, runs := e.work("first", want)
	got, replayed, err := e.guard.Do(context.Background(), req("s", "k1", "fp"), work)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if replayed {
		t.Error("first call: replayed = true, want false")
	}
	assertResult(t, got, want)
	if n := runs.Get(); n != 1 {
		t.Errorf("work ran %d times, want 1", n)
	}
	if n := e.effects(t, "first"); n != 1 {
		t.Errorf("effects = %d, want 1", n)
	}
	if in, ok := e.store.(idem.Inspector); ok {
		rec, err := in.Lookup(context.Background(), &idem.LookupParams{Scope: "s", Key: "k1"})
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		if rec.Fingerprint != "fp" || rec.State != idem.StateCompleted {
			t.Errorf("record fingerprint, state = %q, %q; want %q, %q", rec.Fingerprint, rec.State, "fp", idem.StateCompleted)
		}
		if want := e.clock.Now().Add(testTTL); !rec.ExpiresAt.Equal(want) {
			t.Errorf("record ExpiresAt = %v, want %v", rec.ExpiresAt, want)
		}
		assertResult(t, rec.Result, want)
	}
}

func retryReplaysIdenticalResultWithoutRunning(t testing.TB, h *Harness) {
	e := setup(t, h)
	body := make([]byte, 256)
	for i := range body {
		body[i] = byte(i)
	}
	want := idem.Result{
		Status: 422,
		Header: map[string][]string{"Content-Type": {"application/problem+json"}, "X-Multi": {"a", "b"}},
		Body:   body,
	}
	work, runs := e.work("replay", want)
	if _, _, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work); err != nil {
		t.Fatalf("first Do: %v", err)
	}
	for i := range 3 {
		got, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work)
		if err != nil {
			t.Fatalf("retry %d: %v", i, err)
		}
		if !replayed {
			t.Errorf("retry %d: replayed = false, want true", i)
		}
		assertResult(t, got, want)
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("work ran %d times, want 1", n)
	}
	if n := e.effects(t, "replay"); n != 1 {
		t.Errorf("effects = %d, want 1", n)
	}
}

func emptyResultReplays(t testing.TB, h *Harness) {
	e := setup(t, h)
	work, runs := e.work("empty", idem.Result{})
	for i := range 2 {
		got, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work)
		if err != nil {
			t.Fatalf("Do %d: %v", i, err)
		}
		if replayed != (i == 1) {
			t.Errorf("Do %d: replayed = %v", i, replayed)
		}
		assertResult(t, got, idem.Result{})
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("work ran %d times, want 1", n)
	}
}

func mismatchNeitherRunsNorReplays(t testing.TB, h *Harness) {
	e := setup(t, h)
	want := idem.Result{Status: 201, Body: []byte("original")}
	work, runs := e.work("mismatch", want)
	if _, _, err := e.guard.Do(context.Background(), req("s", "k", "fp-a"), work); err != nil {
		t.Fatalf("first Do: %v", err)
	}
	other, otherRuns := e.work("mismatch-other", idem.Result{Status: 201, Body: []byte("other")})
	got, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp-b"), other)
	if !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("Do with another fingerprint: err = %v, want ErrMismatch", err)
	}
	if replayed || got.Body != nil {
		t.Errorf("mismatch returned replayed=%v body=%q, want nothing", replayed, got.Body)
	}
	if n := otherRuns.Get(); n != 0 {
		t.Errorf("mismatched work ran %d times, want 0", n)
	}
	if n := e.effects(t, "mismatch-other"); n != 0 {
		t.Errorf("mismatched effects = %d, want 0", n)
	}
	got, replayed, err = e.guard.Do(context.Background(), req("s", "k", "fp-a"), work)
	if err != nil || !replayed {
		t.Fatalf("retry with the original fingerprint: replayed=%v err=%v, want a replay", replayed, err)
	}
	assertResult(t, got, want)
	if n := runs.Get(); n != 1 {
		t.Errorf("work ran %d times, want 1", n)
	}
}

var errWork = errors.New("storetest: the work failed")

func workErrorRollsBackAndRecordsNothing(t testing.TB, h *Harness) {
	e := setup(t, h)
	failing := func(ctx context.Context) (idem.Result, error) {
		if err := e.h.Effect(ctx, "fails"); err != nil {
			t.Errorf("effect: %v", err)
		}
		return idem.Result{Status: 500}, errWork
	}
	_, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp"), failing)
	if !errors.Is(err, errWork) {
		t.Fatalf("Do: err = %v, want the work's error", err)
	}
	if replayed {
		t.Error("replayed = true, want false")
	}
	if n := e.effects(t, "fails"); n != 0 {
		t.Errorf("effects after a failed work = %d, want 0 (rolled back)", n)
	}
	assertNoRecord(t, e, "s", "k")
	work, runs := e.work("fails", idem.Result{Status: 201})
	if _, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work); err != nil || replayed {
		t.Fatalf("retry: replayed=%v err=%v, want a fresh execution", replayed, err)
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("retry ran the work %d times, want 1", n)
	}
	if n := e.effects(t, "fails"); n != 1 {
		t.Errorf("effects after the retry = %d, want 1", n)
	}
}

func workPanicRollsBackAndRecordsNothing(t testing.TB, h *Harness) {
	e := setup(t, h)
	func() {
		defer func() {
			if r := recover(); r != "storetest boom" {
				t.Errorf("recovered %v, want the work's panic", r)
			}
		}()
		_, _, _ = e.guard.Do(context.Background(), req("s", "k", "fp"), func(ctx context.Context) (idem.Result, error) {
			if err := e.h.Effect(ctx, "panics"); err != nil {
				t.Errorf("effect: %v", err)
			}
			panic("storetest boom")
		})
	}()
	if n := e.effects(t, "panics"); n != 0 {
		t.Errorf("effects after a panic = %d, want 0", n)
	}
	assertNoRecord(t, e, "s", "k")
	work, runs := e.work("panics", idem.Result{Status: 201})
	if _, replayed, err := e.guard.Do(context.Background(), req("s", "k", "fp"), work); err != nil || replayed {
		t.Fatalf("retry: replayed=%v err=%v, want a fresh execution (key must not stay in flight)", replayed, err)
	}
	if n := runs.Get(); n != 1 {
		t.Errorf("retry ran the work %d times, want 1", n)
	}
}

func scopesAreIndependent(t testing.TB, h *Harness) {
	e := setup(t, h)
	workA, runsA := e.work("scope-a", idem.Result{Status: 201, Body: []byte("A")})
	workB, runsB := e.work("scope-b", idem.Result{Status: 201, Body: []byte("B")})
	if got, _, err := e.guard.Do(context.Background(), req("alice", "same", "fp-1"), workA); err != nil || string(got.Body) != "A" {
		t.Fatalf("alice: body=%q err=%v", got.Body, err)
	}
	for _, fp := range []string{"fp-1", "fp-2"} {
		scope := "bob-" + fp
		got, replayed, err := e.guard.Do(context.Background(), req(scope, "same", fp), workB)
		if err != nil {
			t.Fatalf("%s: %v", scope, err)
		}
		if replayed || string(got.Body) != "B" {
			t.Errorf("%s: replayed=%v body=%q, want its own execution with body B", scope, replayed, got.Body)
		}
	}
	if a, b := runsA.Get(), runsB.Get(); a != 1 || b != 2 {
		t.Errorf("runs: alice %d, bob %d; want 1, 2", a, b)
	}
	if got, replayed, err := e.guard.Do(context.Background(), req("alice", "same", "fp-1"), workA); err != nil || !replayed || string(got.Body) != "A" {
		t.Errorf("alice retry: body=%q replayed=%v err=%v, want replay of A", got.Body, replayed, err)
	}
}

func commitsWhenCallerGivesUpAfterWork(t testing.TB, h *Harness) {
	e := setup(t, h)
	want := idem.Result{Status: 201, Body: []byte("done")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work, runs := e.work("late", want)
	_, _, err := e.guard.Do(ctx, req("s", "k-late", "fp"), func(ctx context.Context) (idem.Result, error) {
		res, err := work(ctx)
		cancel() // the client disconnects between the work and the commit
		return res, err
	})
	if err != nil {
		t.Fatalf("Do with the caller gone after the work: %v, want the commit to go through", err)
	}
	if n := e.effects(t, "late"); n != 1 {
		t.Errorf("effects = %d, want 1", n)
	}
	got, replayed, err := e.guard.Do(context.Background(), req("s", "k-late", "fp"), work)
	if err != nil || !replayed {
		t.Fatalf("retry: replayed=%v err=%v, want a replay", replayed, err)
	}
	assertResult(t, got, want)
	if n := runs.Get(); n != 1 {
		t.Errorf("work ran %d times, want 1", n)
	}
}

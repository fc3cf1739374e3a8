package leasetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func savingAStepAgainReplacesItsOutput(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	e.saveStep(t, c.Lease, "a", []byte("first"), now)
	e.saveStep(t, c.Lease, "b", []byte("b"), now)
	e.saveStep(t, c.Lease, "a", []byte("second"), now.Add(time.Second))
	steps := e.stepsAtTakeover(t, "k", "fp")
	// Where the replaced step stands in the order is the store's choice.
	byName := map[string][]byte{}
	for _, s := range steps {
		if _, dup := byName[s.Name]; dup {
			t.Errorf("step %q is saved twice: %s", s.Name, stepList(steps))
		}
		byName[s.Name] = s.Output
	}
	if len(steps) != 2 || string(byName["a"]) != "second" || string(byName["b"]) != "b" {
		t.Errorf("steps = %s, want a=\"second\" and b=\"b\"", stepList(steps))
	}
}

func bytesRoundTrip(t testing.TB, h *Harness) {
	// Inputs, step outputs and results are opaque bytes: every byte value
	// comes back; an empty output is a step saved like any other (an
	// empty and a nil one may come back as either).
	e := setup(t, h)
	now := e.clock.Now()
	p := claimParams("k", "fp", now)
	p.Input = allBytes()
	c := e.claim(t, p)
	if !c.Claimed {
		t.Fatalf("Claim of a new key was not claimed: %s", describe(c.Record))
	}
	if !bytes.Equal(c.Record.Input, allBytes()) {
		t.Errorf("Input = %q, want every byte value %q", c.Record.Input, allBytes())
	}
	e.saveStep(t, c.Lease, "all", allBytes(), now)
	e.saveStep(t, c.Lease, "empty", []byte{}, now)
	e.saveStep(t, c.Lease, "nil", nil, now)
	taken := e.mustClaim(t, "k", "fp", c.Record.LeaseUntil)
	if !bytes.Equal(taken.Record.Input, allBytes()) {
		t.Errorf("Input after a takeover = %q, want every byte value", taken.Record.Input)
	}
	sameSteps(t, "the binary steps", taken.Steps, []idem.Step{{Name: "all", Output: allBytes()}, {Name: "empty"}, {Name: "nil"}})

	e.complete(t, taken.Lease, testResult(), now, now.Add(far))
	rec := e.mustNotClaim(t, "k", "fp", now)
	if !sameResult(rec.Result, testResult()) {
		t.Errorf("result = %d %v %q, want %d %v %q byte for byte", rec.Result.Status, rec.Result.Header, rec.Result.Body,
			testResult().Status, testResult().Header, testResult().Body)
	}

	// Empty and nil inputs, and an empty result.
	for _, in := range [][]byte{{}, nil} {
		key := "empty-input"
		if in == nil {
			key = "nil-input"
		}
		p := claimParams(key, "fp", now)
		p.Input, p.Kind = in, ""
		c := e.claim(t, p)
		if !c.Claimed || len(c.Record.Input) != 0 || c.Record.Kind != "" {
			t.Errorf("Claim with input %#v and no kind: claimed %v, record %s; want a claim with no input and no kind", in, c.Claimed, describe(c.Record))
			continue
		}
		e.complete(t, c.Lease, idem.Result{}, now, now.Add(far))
		rec := e.mustNotClaim(t, key, "fp", now)
		if rec.State != idem.StateCompleted || !sameResult(rec.Result, idem.Result{}) {
			t.Errorf("an empty result came back as %d %v %q", rec.Result.Status, rec.Result.Header, rec.Result.Body)
		}
	}
}

func localStepCommitsWithItsEffect(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	st := e.openStep(t, c.Lease, "debit", now)
	if n := e.effects(t, "debit"); n != 0 {
		t.Errorf("effects before the step commits = %d, want 0", n)
	}
	if err := st.Commit(context.Background(), []byte("debited")); err != nil {
		t.Fatalf("StepTx.Commit of the current holder: %v", err)
	}
	if err := st.Rollback(context.Background()); err != nil {
		t.Errorf("Rollback after Commit: %v, want nil", err)
	}
	if n := e.effects(t, "debit"); n != 1 {
		t.Errorf("effects after the step committed = %d, want 1", n)
	}
	sameSteps(t, "the steps after a local step", e.stepsAtTakeover(t, "k", "fp"), []idem.Step{{Name: "debit", Output: []byte("debited")}})
}

func localStepRollbackLeavesNothing(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	st := e.openStep(t, c.Lease, "debit", now)
	if err := st.Rollback(context.Background()); err != nil {
		t.Fatalf("StepTx.Rollback: %v", err)
	}
	if n := e.effects(t, "debit"); n != 0 {
		t.Errorf("effects after the step rolled back = %d, want 0", n)
	}
	// The record is free again for its holder's writes and, once the
	// lease ends, for a takeover.
	e.saveStep(t, c.Lease, "after", []byte("x"), now)
	sameSteps(t, "the steps after a rolled-back local step", e.stepsAtTakeover(t, "k", "fp"), []idem.Step{{Name: "after", Output: []byte("x")}})
}

func staleLocalStepNeverCommitsAfterATakeover(t testing.TB, h *Harness) {
	// A holder opens a local step; its lease ends and a takeover is tried
	// while the step is open; then the step commits. Either the takeover
	// waited for (or was refused by) the step, or the step's commit is
	// refused: never a new holder and the stale step's effect.
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	st := e.openStep(t, c.Lease, "debit", now)

	type answer struct {
		c   *idem.Claim
		err error
	}
	claimed := make(chan answer, 1)
	go func() {
		c, err := e.store.Claim(context.Background(), claimParams("k", "fp", c.Record.LeaseUntil))
		claimed <- answer{c, err}
	}()
	var a answer
	early := false
	select {
	case a = <-claimed: // the store answered the takeover at once
		early = true
	case <-time.After(200 * time.Millisecond): // it waits for the step's lock, presumably
	}
	commitErr := st.Commit(context.Background(), []byte("debited"))
	if commitErr != nil {
		_ = st.Rollback(context.Background())
	}
	if !early {
		select {
		case a = <-claimed:
		case <-time.After(30 * time.Second):
			t.Fatalf("the takeover did not end within 30 s of the step's commit (commit err %v)", commitErr)
		}
	}
	if a.err != nil || a.c == nil || a.c.Record == nil {
		t.Fatalf("the takeover: %+v, %v", a.c, a.err)
	}
	committed := commitErr == nil
	if commitErr != nil && !errors.Is(commitErr, idem.ErrFenced) {
		t.Errorf("StepTx.Commit failed with %v; a refused step's commit matches ErrFenced", commitErr)
	}
	effects := e.effects(t, "debit")
	if want := map[bool]int{true: 1, false: 0}[committed]; effects != want {
		t.Errorf("the step's commit returned %v but its effect was applied %d times: the effect and its recovery point commit together or not at all", commitErr, effects)
	}
	if a.c.Claimed {
		hasStep := len(a.c.Steps) == 1 && a.c.Steps[0].Name == "debit"
		switch {
		case committed && !hasStep:
			t.Errorf("the takeover (token %d) succeeded before the stale step committed, and the step still committed its effect: the stale holder wrote after its lease was taken over", a.c.Record.Token)
		case !committed && hasStep:
			t.Errorf("the takeover received the step %q although the step's commit failed (%v)", "debit", commitErr)
		}
		return
	}
	// The takeover was refused while the step was open: the step may have
	// committed, and the next holder resumes after it.
	steps := e.stepsAtTakeover(t, "k", "fp")
	if hasStep := len(steps) == 1 && steps[0].Name == "debit"; hasStep != committed {
		t.Errorf("steps at the next takeover = %s, the step's commit returned %v: a step is recorded exactly when it committed", stepList(steps), commitErr)
	}
}

func localStepCannotCommitOnACompletedRecord(t testing.TB, h *Harness) {
	// A holder opens a local step, and (another goroutine of) the same
	// holder completes the record meanwhile. Either the completion waits
	// for the step, or the step's commit is refused: a step never commits
	// on a completed record.
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	st := e.openStep(t, c.Lease, "debit", now)
	completed := make(chan error, 1)
	go func() {
		completed <- e.store.Complete(context.Background(), &idem.CompleteParams{
			Lease: c.Lease, Result: idem.Result{Status: 201}, Now: now, ExpiresAt: now.Add(far),
		})
	}()
	var completeErr error
	early := false
	select {
	case completeErr = <-completed:
		early = true
	case <-time.After(200 * time.Millisecond): // it waits for the step, presumably
	}
	commitErr := st.Commit(context.Background(), []byte("debited"))
	if commitErr != nil {
		_ = st.Rollback(context.Background())
	}
	if !early {
		select {
		case completeErr = <-completed:
		case <-time.After(30 * time.Second):
			t.Fatalf("Complete did not end within 30 s of the step's commit (commit err %v)", commitErr)
		}
	}
	if completeErr != nil {
		t.Fatalf("Complete of the current holder: %v", completeErr)
	}
	effects := e.effects(t, "debit")
	switch {
	case early && commitErr == nil:
		t.Errorf("the step committed after its record was completed (effects %d): a write on a completed record must fail with ErrFenced", effects)
	case commitErr != nil && !errors.Is(commitErr, idem.ErrFenced):
		t.Errorf("the step's commit failed with %v, want nil or ErrFenced", commitErr)
	}
	if want := map[bool]int{true: 1, false: 0}[commitErr == nil]; effects != want {
		t.Errorf("the step's commit returned %v but its effect was applied %d times: the effect commits with its recovery point or not at all", commitErr, effects)
	}
	if rec := e.mustNotClaim(t, "k", "fp", now); rec.State != idem.StateCompleted || rec.Result.Status != 201 {
		t.Errorf("the record after the completion: %s, want it completed", describe(rec))
	}
}

package storetest

// The cases of this file drive the Store and Tx contract directly, and
// through the Harness hooks break the transaction the ways the Guard alone
// never does.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func beginLocksTheKeyUntilTheTxEnds(t testing.TB, h *Harness) {
	e := setup(t, h)
	ctx := context.Background()
	now := e.clock.Now()
	tx := e.begin(t, "k", now)
	// A Begin that waits for the holder instead of refusing would wait
	// for ever here: bound it.
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	rec, tx2, err := e.store.Begin(bctx, &idem.BeginParams{Scope: "s", Key: "k", Now: now})
	cancel()
	if tx2 != nil {
		_ = tx2.Rollback(ctx)
	}
	if !errors.Is(err, idem.ErrInFlight) || rec != nil || tx2 != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("a second Begin while a Tx holds the key: record=%v tx=%v err=%v; want ErrInFlight alone", rec, tx2, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	tx = e.begin(t, "k", now) // the key is free again
	if err := tx.Commit(ctx, &idem.CommitParams{Record: record("k", "fp", now, testTTL), Now: now}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	rec, tx2, err = e.store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: now})
	if tx2 != nil {
		_ = tx2.Rollback(ctx)
	}
	if err != nil || rec == nil || tx2 != nil || rec.Fingerprint != "fp" {
		t.Fatalf("Begin after Commit: record=%+v tx=%v err=%v; want the committed record and no Tx", rec, tx2, err)
	}
}

func rollbackAfterTheEndIsANoOp(t testing.TB, h *Harness) {
	e := setup(t, h)
	ctx := context.Background()
	now := e.clock.Now()

	tx := e.begin(t, "rolled-back", now)
	if err := h.Effect(idem.WithTx(ctx, tx), "rolled-back"); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("effect: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Errorf("Rollback after Rollback: %v, want nil", err)
	}
	if n := e.effects(t, "rolled-back"); n != 0 {
		t.Errorf("effects after Rollback = %d, want 0", n)
	}

	tx = e.begin(t, "committed", now)
	if err := h.Effect(idem.WithTx(ctx, tx), "committed"); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("effect: %v", err)
	}
	if err := tx.Commit(ctx, &idem.CommitParams{Record: record("committed", "fp", now, testTTL), Now: now}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for i := range 2 {
		if err := tx.Rollback(ctx); err != nil {
			t.Errorf("Rollback %d after Commit: %v, want nil", i+1, err)
		}
	}
	if n := e.effects(t, "committed"); n != 1 {
		t.Errorf("effects after Commit then Rollback = %d, want 1: Rollback undid a commit", n)
	}
	rec, tx2, err := e.store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "committed", Now: now})
	if tx2 != nil {
		_ = tx2.Rollback(ctx)
	}
	if err != nil || rec == nil {
		t.Errorf("Begin after Commit then Rollback: record=%v tx=%v err=%v; want the committed record", rec, tx2, err)
	}
	// Both keys are free.
	_ = e.begin(t, "rolled-back", now).Rollback(ctx)
}

func lookupOfAMissingRecordIsNotFound(t testing.TB, h *Harness) {
	e := setup(t, h)
	in, ok := e.store.(idem.Inspector)
	if !ok {
		t.Skip("the store is not an idem.Inspector")
	}
	ctx := context.Background()
	now := e.clock.Now()
	e.commit(t, record("k", "fp", now, testTTL), now)
	_ = e.begin(t, "rolled-back", now).Rollback(ctx)
	for _, p := range []idem.LookupParams{
		{Scope: "s", Key: "never-used"},
		{Scope: "s", Key: "rolled-back"},
		{Scope: "other", Key: "k"},
	} {
		rec, err := in.Lookup(ctx, &p)
		if !errors.Is(err, idem.ErrNotFound) || rec != nil {
			t.Errorf("Lookup(%q, %q) = %+v, %v; want nil, ErrNotFound", p.Scope, p.Key, rec, err)
		}
	}
	if rec, err := in.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"}); err != nil || rec == nil || rec.Fingerprint != "fp" {
		t.Errorf("Lookup of the committed record = %+v, %v; want it", rec, err)
	}
}

func commitReplacesAnExpiredRecord(t testing.TB, h *Harness) {
	e := setup(t, h)
	ctx := context.Background()
	t0 := e.clock.Now()
	e.commit(t, record("k", "old", t0, time.Minute), t0)
	t1 := t0.Add(time.Minute) // the old record expires at t1 exactly
	tx := e.begin(t, "k", t1)
	if err := h.Effect(idem.WithTx(ctx, tx), "new"); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("effect: %v", err)
	}
	if err := tx.Commit(ctx, &idem.CommitParams{Record: record("k", "new", t1, time.Hour), Now: t1}); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("Commit over the expired record: %v, want it replaced", err)
	}
	if n := e.effects(t, "new"); n != 1 {
		t.Errorf("effects = %d, want 1", n)
	}
	rec, tx2, err := e.store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t1})
	if tx2 != nil {
		_ = tx2.Rollback(ctx)
	}
	if err != nil || rec == nil || rec.Fingerprint != "new" || !rec.ExpiresAt.Equal(t1.Add(time.Hour)) {
		t.Errorf("Begin after the replacement: record=%+v tx=%v err=%v; want the new record, expiring at %v", rec, tx2, err, t1.Add(time.Hour))
	}
	if got, ok := e.lookup(t, "k"); ok && (got == nil || got.Fingerprint != "new") {
		t.Errorf("Lookup after the replacement = %+v; want the new record", got)
	}
}

func commitNeverReplacesARecordLiveAtItsNow(t testing.TB, h *Harness) {
	e := setup(t, h)
	ctx := context.Background()
	t0 := e.clock.Now()
	e.commit(t, record("k", "old", t0, time.Hour), t0)
	// Begin runs on a clock two hours ahead and sees the record expired;
	// Commit's Now is half an hour after t0, when the record is live.
	tx := e.begin(t, "k", t0.Add(2*time.Hour))
	if err := h.Effect(idem.WithTx(ctx, tx), "late"); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("effect: %v", err)
	}
	at := t0.Add(30 * time.Minute)
	err := tx.Commit(ctx, &idem.CommitParams{Record: record("k", "new", at, time.Hour), Now: at})
	_ = tx.Rollback(ctx)
	if !errors.Is(err, idem.ErrConflict) {
		t.Errorf("Commit at %v over a record live until %v: %v, want ErrConflict", at, t0.Add(time.Hour), err)
	}
	if n := e.effects(t, "late"); n != 0 {
		t.Errorf("effects after the conflict = %d, want 0 (rolled back)", n)
	}
	rec, tx2, err := e.store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: at})
	if tx2 != nil {
		_ = tx2.Rollback(ctx)
	}
	if err != nil || rec == nil || rec.Fingerprint != "old" {
		t.Errorf("Begin at %v: record=%+v tx=%v err=%v; want the old record, untouched", at, rec, tx2, err)
	}
}

func commitMeetingALiveRecordConflicts(t testing.TB, h *Harness) {
	if h.PlantRecord == nil {
		t.Skip("Harness.PlantRecord is nil")
	}
	e := setup(t, h)
	now := e.clock.Now()
	e.conflictBehindTheLock(t, "key-that-must-not-be-logged", now)
}

func commitNeverDeletesALiveRecordThatReplacedAnExpiredOne(t testing.TB, h *Harness) {
	if h.PlantRecord == nil {
		t.Skip("Harness.PlantRecord is nil")
	}
	e := setup(t, h)
	t0 := e.clock.Now()
	e.commit(t, record("k", "old", t0, time.Minute), t0)
	// Begin sees the old record expired; then a live one takes its place
	// behind the lock.
	e.conflictBehindTheLock(t, "k", t0.Add(2*time.Minute))
}

// conflictBehindTheLock begins key at now, writes an effect, plants a live
// record of key and checks that Commit fails with ErrConflict, rolls the
// effect back and leaves the planted record as it was.
func (e *env) conflictBehindTheLock(t testing.TB, key string, now time.Time) {
	t.Helper()
	ctx := context.Background()
	tx := e.begin(t, key, now)
	tctx := idem.WithTx(ctx, tx)
	if err := e.h.Effect(tctx, "conflict"); err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("effect: %v", err)
	}
	theirs := record(key, "theirs", now, time.Hour)
	throughTx, err := e.h.PlantRecord(tctx, e.store, theirs)
	if err != nil {
		_ = tx.Rollback(ctx)
		t.Fatalf("PlantRecord: %v", err)
	}
	err = tx.Commit(ctx, &idem.CommitParams{Record: record(key, "ours", now, time.Hour), Now: now})
	_ = tx.Rollback(ctx)
	if !errors.Is(err, idem.ErrConflict) {
		t.Errorf("Commit over a live record written behind the lock: %v, want ErrConflict", err)
	}
	// Errors end up in log lines: they name a record by digest, since a
	// scope may hold a principal and a key may be a client's secret.
	if err != nil && len(key) > 8 && strings.Contains(err.Error(), key) {
		t.Errorf("Commit's error quotes the key %q: %v", key, err)
	}
	if n := e.effects(t, "conflict"); n != 0 {
		t.Errorf("effects after the conflict = %d, want 0: the effect committed without its record", n)
	}
	e.assertPlanted(t, key, theirs, throughTx)
}

// assertPlanted checks, after a Commit met the planted record theirs, that
// the key is free and holds theirs as it was (or, when it was planted
// through the Tx and went with its rollback, at least not ours).
func (e *env) assertPlanted(t testing.TB, key string, theirs *idem.Record, throughTx bool) {
	t.Helper()
	ctx := context.Background()
	rec, tx, err := e.store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: key, Now: theirs.CreatedAt})
	if tx != nil {
		_ = tx.Rollback(ctx)
	}
	switch {
	case err != nil:
		t.Errorf("Begin after the conflict: %v; want the key free", err)
	case rec == nil && !throughTx:
		t.Errorf("after the conflict (%q, %q) has no live record: the record planted behind the lock was deleted", "s", key)
	case rec != nil && rec.Fingerprint != theirs.Fingerprint:
		t.Errorf("after the conflict the record of (%q, %q) has fingerprint %q; want %q, planted behind the lock and never overwritten", "s", key, rec.Fingerprint, theirs.Fingerprint)
	case rec != nil && (string(rec.Result.Body) != string(theirs.Result.Body) || !rec.ExpiresAt.Equal(theirs.ExpiresAt)):
		t.Errorf("after the conflict the planted record is %+v; want %+v", rec, theirs)
	}
}

func recordCommitsInTheEffectsTransaction(t testing.TB, h *Harness) {
	if h.PlantRecord == nil && h.FailCommit == nil {
		t.Skip("Harness.PlantRecord and Harness.FailCommit are nil")
	}
	e := setup(t, h)
	ctx := context.Background()
	if h.PlantRecord != nil {
		// The record cannot be written (a live one is in its place): the
		// effect must not commit without it.
		now := e.clock.Now()
		tx := e.begin(t, "unwritable", now)
		tctx := idem.WithTx(ctx, tx)
		if err := h.Effect(tctx, "unwritable"); err != nil {
			_ = tx.Rollback(ctx)
			t.Fatalf("effect: %v", err)
		}
		if _, err := h.PlantRecord(tctx, e.store, record("unwritable", "theirs", now, time.Hour)); err != nil {
			_ = tx.Rollback(ctx)
			t.Fatalf("PlantRecord: %v", err)
		}
		err := tx.Commit(ctx, &idem.CommitParams{Record: record("unwritable", "ours", now, time.Hour), Now: now})
		_ = tx.Rollback(ctx)
		if err == nil {
			t.Errorf("Commit over a live record: nil error")
		}
		if n := e.effects(t, "unwritable"); n != 0 {
			t.Errorf("the record could not be written (%v) but the effect committed (%d): it was not in the record's transaction", err, n)
		}
	}
	if h.FailCommit != nil {
		// The transaction cannot commit: the record must not be left
		// without the effect, and the failure is the work's, not a
		// conflict with a record that does not exist.
		now := e.clock.Now()
		tx := e.begin(t, "doomed", now)
		tctx := idem.WithTx(ctx, tx)
		if err := h.Effect(tctx, "doomed"); err != nil {
			_ = tx.Rollback(ctx)
			t.Fatalf("effect: %v", err)
		}
		if err := h.FailCommit(tctx); err != nil {
			_ = tx.Rollback(ctx)
			t.Fatalf("FailCommit: %v", err)
		}
		err := tx.Commit(ctx, &idem.CommitParams{Record: record("doomed", "fp", now, testTTL), Now: now})
		_ = tx.Rollback(ctx)
		switch {
		case err == nil:
			t.Errorf("Commit of a transaction that cannot commit: nil error")
		case errors.Is(err, idem.ErrConflict):
			t.Errorf("Commit failed for the work's own reason and calls it ErrConflict, which means a live record of the key: %v", err)
		}
		if n := e.effects(t, "doomed"); n != 0 {
			t.Errorf("effects after the failed commit = %d, want 0", n)
		}
		assertNoRecord(t, e, "s", "doomed")
		work, runs := e.work("doomed", idem.Result{Status: 201})
		if _, replayed, err := e.guard.Do(ctx, req("s", "doomed", "fp"), work); err != nil || replayed || runs.Get() != 1 {
			t.Errorf("Do after the failed commit: replayed=%v runs=%d err=%v; want a fresh run (a record outlived its transaction)", replayed, runs.Get(), err)
		}
	}
}

func workThatEndsItsTransactionRecordsNothing(t testing.TB, h *Harness) {
	if h.EndTx == nil {
		t.Skip("Harness.EndTx is nil")
	}
	e := setup(t, h)
	ctx := context.Background()
	for i, end := range txEnds {
		key := fmt.Sprintf("ended-%d", i)
		_, _, err := e.guard.Do(ctx, req("s", key, "fp"), func(ctx context.Context) (idem.Result, error) {
			if err := h.Effect(ctx, key); err != nil {
				t.Errorf("%s: effect: %v", end, err)
			}
			if err := h.EndTx(ctx, end); err != nil {
				t.Errorf("EndTx(%q): %v", end, err)
			}
			return idem.Result{Status: 201}, nil
		})
		if err == nil {
			t.Errorf("%s: Do = nil error; want the commit refused, for the work ended the transaction Begin opened", end)
		}
		assertNoRecord(t, e, "s", key)
		if end == EndRollback || end == EndRollbackBegin {
			if n := e.effects(t, key); n != 0 {
				t.Errorf("%s: effects = %d, want 0 (the work rolled its effect back)", end, n)
			}
		}
		work, runs := e.work("retry-"+key, idem.Result{Status: 201})
		if _, replayed, err := e.guard.Do(ctx, req("s", key, "fp"), work); err != nil || replayed || runs.Get() != 1 {
			t.Errorf("%s: retry: replayed=%v runs=%d err=%v; want a fresh run (a record was committed outside Begin's transaction)", end, replayed, runs.Get(), err)
		}
	}
}

func refusedCallerNeverGetsAnExpiredRecord(t testing.TB, h *Harness) {
	e := setup(t, h)
	ctx := context.Background()
	work, _ := e.work("expired", idem.Result{Status: 201, Body: []byte("old")})
	if _, _, err := e.guard.Do(ctx, req("s", "k", "fp"), work); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(testTTL)
	now := e.clock.Now()
	tx := e.begin(t, "k", now) // holds the key while the next callers come
	defer func() { _ = tx.Rollback(ctx) }()
	rec, tx2, err := e.store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: now})
	if tx2 != nil {
		_ = tx2.Rollback(ctx)
	}
	switch {
	case rec != nil:
		t.Errorf("Begin refused while the key is in flight returned the record that expired at %v; want ErrInFlight alone", rec.ExpiresAt)
	case !errors.Is(err, idem.ErrInFlight) || tx2 != nil:
		t.Errorf("Begin while the key is in flight: tx=%v err=%v; want ErrInFlight", tx2, err)
	}
	got, replayed, err := e.guard.Do(ctx, req("s", "k", "fp"), work)
	if replayed || !errors.Is(err, idem.ErrInFlight) {
		t.Errorf("Do while the key is in flight: body=%q replayed=%v err=%v; want ErrInFlight, not a replay of the expired record", got.Body, replayed, err)
	}
}

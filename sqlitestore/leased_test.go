package sqlitestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// Focused tests of leased mode on SQLite (LeasedStore, LeasedTxStore); the
// shared rules run in leased_conformance_test.go.

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)

const lease = 30 * time.Second

func claimAt(t *testing.T, s *sqlitestore.Store, key, fp string, now time.Time) *idem.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), &idem.ClaimParams{
		Scope: "s", Key: key, Fingerprint: fp, Kind: "payout", Input: []byte("in"), Now: now, Lease: lease,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func lookupRecord(t *testing.T, s *sqlitestore.Store, key string) *idem.Record {
	t.Helper()
	rec, err := s.Lookup(context.Background(), &idem.LookupParams{Scope: "s", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func stepNames(steps []idem.Step) string {
	var b bytes.Buffer
	for _, st := range steps {
		fmt.Fprintf(&b, "%s=%s;", st.Name, st.Output)
	}
	return b.String()
}

func TestClaimWritesAPendingRecord(t *testing.T) {
	// A new claim commits a pending record: Attempts 1, a token of at
	// least Now in microseconds, LeaseUntil = Now + lease, Kind and Input
	// kept, and ExpiresAt = PendingExpiresAt; Lookup reads it back so.
	t.Parallel()
	s, _ := setup(t)
	c := claimAt(t, s, "k", "fp", t0)
	if !c.Claimed || c.Lease.Token < t0.UnixMicro() || c.Lease.Token != c.Record.Token {
		t.Fatalf("claim = %+v, want claimed with a token >= %d", c, t0.UnixMicro())
	}
	rec := lookupRecord(t, s, "k")
	if rec.State != idem.StatePending || rec.Token != c.Lease.Token || rec.Attempts != 1 ||
		!rec.LeaseUntil.Equal(t0.Add(lease)) || !rec.ExpiresAt.Equal(idem.PendingExpiresAt) ||
		!rec.CreatedAt.Equal(t0) || rec.Kind != "payout" || string(rec.Input) != "in" || rec.Fingerprint != "fp" {
		t.Errorf("stored record = %+v", rec)
	}
	if rec.Expired(idem.PendingExpiresAt.Add(time.Hour)) {
		t.Error("a pending record read back from the file expires")
	}
}

func TestClaimAnswersWhatItCannotTake(t *testing.T) {
	// A pending record under a live lease, a pending record with another
	// fingerprint and a live completed record are returned unclaimed and
	// left as they were.
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	first := claimAt(t, s, "k", "fp", t0)
	for _, tt := range []struct {
		name string
		fp   string
		now  time.Time
	}{
		{"LiveLease", "fp", t0.Add(lease - time.Nanosecond)},
		{"OtherFingerprint", "other", t0.Add(2 * lease)},
	} {
		c := claimAt(t, s, "k", tt.fp, tt.now)
		if c.Claimed || c.Record.State != idem.StatePending || c.Record.Token != first.Lease.Token {
			t.Errorf("%s: claim = %+v, want the pending record unclaimed", tt.name, c)
		}
	}
	err := s.Complete(ctx, &idem.CompleteParams{Lease: first.Lease, Result: idem.Result{Status: 201, Body: []byte("done"),
		Header: map[string][]string{"Content-Type": {"text/plain"}}}, Now: t0, ExpiresAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	c := claimAt(t, s, "k", "fp", t0.Add(time.Hour-time.Nanosecond))
	if c.Claimed || c.Record.State != idem.StateCompleted || c.Record.Result.Status != 201 ||
		string(c.Record.Result.Body) != "done" || c.Record.Result.Header["Content-Type"][0] != "text/plain" {
		t.Errorf("claim of a live completed record = %+v", c)
	}
	if rec := lookupRecord(t, s, "k"); rec.Token != first.Lease.Token || rec.Attempts != 1 {
		t.Errorf("record after refused claims = %+v, want token %d and 1 attempt", rec, first.Lease.Token)
	}
}

func TestClaimTakesOverAnEndedLease(t *testing.T) {
	// At LeaseUntil the record is taken over: token + 1, Attempts + 1,
	// the new lease, and the steps in the order they were first saved (a
	// step saved again keeps its place and gets its new output).
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	c := claimAt(t, s, "k", "fp", t0)
	for _, st := range []idem.Step{{Name: "b", Output: []byte("1")}, {Name: "a", Output: []byte("2")}, {Name: "b", Output: []byte("3")}, {Name: "c"}} {
		if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: st.Name, Output: st.Output, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(lease)
	c2 := claimAt(t, s, "k", "fp", now)
	if !c2.Claimed || c2.Lease.Token != c.Lease.Token+1 || c2.Record.Attempts != 2 || !c2.Record.LeaseUntil.Equal(now.Add(lease)) {
		t.Fatalf("takeover = %+v (record %+v), want token %d, attempt 2", c2, c2.Record, c.Lease.Token+1)
	}
	if got, want := stepNames(c2.Steps), "b=3;a=2;c=;"; got != want {
		t.Errorf("steps = %q, want %q", got, want)
	}
	if rec := lookupRecord(t, s, "k"); rec.Token != c2.Lease.Token || rec.Attempts != 2 || !rec.LeaseUntil.Equal(now.Add(lease)) {
		t.Errorf("stored record = %+v", rec)
	}
}

func TestFormerHolderIsFenced(t *testing.T) {
	// Every write of a holder whose record was taken over fails with
	// ErrFenced and writes nothing; so do writes to a completed or a
	// missing record.
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	old := claimAt(t, s, "k", "fp", t0)
	if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: old.Lease, Name: "one", Output: []byte("x"), Now: t0}); err != nil {
		t.Fatal(err)
	}
	cur := claimAt(t, s, "k", "fp", t0.Add(lease))
	before := lookupRecord(t, s, "k")
	writes := func(l idem.Lease) map[string]error {
		st, err := s.BeginStep(ctx, &idem.BeginStepParams{Lease: l, Name: "local", Now: t0})
		if err == nil {
			st.Rollback(ctx)
		}
		return map[string]error{
			"Heartbeat": s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: l, Now: t0, Duration: time.Hour}),
			"SaveStep":  s.SaveStep(ctx, &idem.SaveStepParams{Lease: l, Name: "one", Output: []byte("late"), Now: t0}),
			"Release":   s.Release(ctx, &idem.ReleaseParams{Lease: l, Now: t0, RetryAt: t0, Error: "late"}),
			"Complete":  s.Complete(ctx, &idem.CompleteParams{Lease: l, Result: idem.Result{Status: 500}, Now: t0, ExpiresAt: t0.Add(time.Hour)}),
			"BeginStep": err,
		}
	}
	for name, err := range writes(old.Lease) {
		if !errors.Is(err, idem.ErrFenced) {
			t.Errorf("former holder's %s: err = %v, want ErrFenced", name, err)
		}
	}
	after := lookupRecord(t, s, "k")
	if after.State != idem.StatePending || !after.LeaseUntil.Equal(before.LeaseUntil) || after.LastError != "" || after.Token != cur.Lease.Token {
		t.Errorf("record after fenced writes = %+v, want %+v", after, before)
	}
	if sqlitestore.WriterSlotHeld(s) {
		t.Error("a fenced write left the writer slot held")
	}
	// The current holder still writes, then completes; afterwards it is
	// fenced too, and so is a lease of a key that has no record.
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: cur.Lease, Result: idem.Result{Status: 200}, Now: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for name, err := range writes(cur.Lease) {
		if !errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s after Complete: err = %v, want ErrFenced", name, err)
		}
	}
	for name, err := range writes(idem.Lease{Scope: "s", Key: "missing", Token: 1}) {
		if !errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s of a missing record: err = %v, want ErrFenced", name, err)
		}
	}
	if rec := lookupRecord(t, s, "k"); rec.State != idem.StateCompleted || rec.Result.Status != 200 {
		t.Errorf("record = %+v, want completed with 200", rec)
	}
}

func TestCompleteDeletesStepsAndTokensKeepGrowing(t *testing.T) {
	// Complete keeps the result until ExpiresAt and deletes the steps. A
	// claim after expiry writes a new record (Attempts 1, no steps) with a
	// token greater than the old one, even when its clock is behind the
	// old token (the token is then the old one plus one).
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	c := claimAt(t, s, "k", "fp", t0)
	if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: "one", Output: []byte("x"), Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: c.Lease, Result: idem.Result{Status: 201}, Now: t0, ExpiresAt: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	var steps int
	if err := s.DB().QueryRow(`SELECT count(*) FROM idem_steps`).Scan(&steps); err != nil || steps != 0 {
		t.Errorf("steps after Complete = %d, %v; want 0", steps, err)
	}
	if c := claimAt(t, s, "k", "other", t0.Add(time.Second-time.Nanosecond)); c.Claimed {
		t.Fatalf("claim before expiry: %+v", c)
	}
	c2 := claimAt(t, s, "k", "other", t0.Add(time.Second))
	if !c2.Claimed || c2.Lease.Token <= c.Lease.Token || c2.Record.Attempts != 1 || len(c2.Steps) != 0 || c2.Record.Fingerprint != "other" {
		t.Fatalf("claim after expiry = %+v (record %+v), want a new record with a greater token", c2, c2.Record)
	}
	earlier := t0.Add(-time.Hour)
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: c2.Lease, Result: idem.Result{Status: 200}, Now: t0, ExpiresAt: earlier.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	c3 := claimAt(t, s, "k", "fp", earlier)
	if !c3.Claimed || c3.Lease.Token != c2.Lease.Token+1 {
		t.Errorf("claim with a clock behind the old token: token %d, want %d", c3.Lease.Token, c2.Lease.Token+1)
	}
}

func TestReleaseEndsTheLeaseAtRetryAt(t *testing.T) {
	// Release keeps the record pending with LeaseUntil = RetryAt and the
	// error; Heartbeat moves LeaseUntil; a claim at RetryAt takes over.
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	c := claimAt(t, s, "k", "fp", t0)
	if err := s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: c.Lease, Now: t0.Add(time.Second), Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if rec := lookupRecord(t, s, "k"); !rec.LeaseUntil.Equal(t0.Add(time.Second + time.Minute)) {
		t.Errorf("LeaseUntil after Heartbeat = %v", rec.LeaseUntil)
	}
	retryAt := t0.Add(5 * time.Second)
	if err := s.Release(ctx, &idem.ReleaseParams{Lease: c.Lease, Now: t0, RetryAt: retryAt, Error: "provider down"}); err != nil {
		t.Fatal(err)
	}
	rec := lookupRecord(t, s, "k")
	if rec.State != idem.StatePending || !rec.LeaseUntil.Equal(retryAt) || rec.LastError != "provider down" {
		t.Errorf("released record = %+v", rec)
	}
	if c := claimAt(t, s, "k", "fp", retryAt.Add(-time.Nanosecond)); c.Claimed {
		t.Error("claimed before RetryAt")
	}
	if c := claimAt(t, s, "k", "fp", retryAt); !c.Claimed || c.Record.Attempts != 2 || c.Record.LastError != "provider down" {
		t.Errorf("claim at RetryAt = %+v (record %+v)", c, c.Record)
	}
}

func TestAbandonedListsEndedLeasesOldestFirst(t *testing.T) {
	// Abandoned returns pending records whose lease has ended, the longest
	// ended first, at most Limit; never live leases or completed records.
	// It reads, so a read-only store answers it too.
	t.Parallel()
	s, path := setup(t)
	ctx := context.Background()
	for i, key := range []string{"c", "a", "live", "b", "done"} {
		claimAt(t, s, key, "fp", t0.Add(time.Duration(-i)*time.Second))
	}
	live := lookupRecord(t, s, "live")
	if err := s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: idem.Lease{Scope: "s", Key: "live", Token: live.Token}, Now: t0, Duration: time.Hour}); err != nil {
		t.Fatal(err)
	}
	done := lookupRecord(t, s, "done")
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: idem.Lease{Scope: "s", Key: "done", Token: done.Token}, Now: t0, ExpiresAt: t0}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(lease)
	ro, err := sqlitestore.Open(ctx, path, &sqlitestore.Config{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for name, st := range map[string]*sqlitestore.Store{"Writer": s, "ReadOnly": ro} {
		for _, tt := range []struct {
			limit int
			want  string
		}{{10, "b,a,c,"}, {2, "b,a,"}, {0, ""}} {
			got, err := st.Abandoned(ctx, &idem.AbandonedParams{Now: now, Limit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			var keys string
			for _, r := range got {
				keys += r.Key + ","
				if r.State != idem.StatePending || r.Scope != "s" || r.Kind != "payout" || string(r.Input) != "in" {
					t.Errorf("%s: abandoned record %+v", name, r)
				}
			}
			if keys != tt.want {
				t.Errorf("%s: Abandoned(limit %d) = %q, want %q", name, tt.limit, keys, tt.want)
			}
		}
	}
	if _, err := ro.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "new", Fingerprint: "fp", Now: now, Lease: lease}); !errors.Is(err, sqlitestore.ErrReadOnly) {
		t.Errorf("Claim on a read-only store: %v, want ErrReadOnly", err)
	}
}

func TestConcurrentClaimsOfOneKeyOneWins(t *testing.T) {
	// Of concurrent claims of one key, through two Store values of one file
	// and many goroutines, exactly one claims; the others see its record.
	t.Parallel()
	a, path := setup(t)
	b, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for round := range 5 {
		key := fmt.Sprintf("k%d", round)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			claimed int
			tokens  = map[int64]bool{}
		)
		for i := range 50 {
			st := a
			if i%2 == 1 {
				st = b
			}
			wg.Go(func() {
				c, err := st.Claim(context.Background(), &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Now: t0, Lease: lease})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if c.Claimed {
					claimed++
				}
				tokens[c.Record.Token] = true
			})
		}
		wg.Wait()
		if claimed != 1 || len(tokens) != 1 {
			t.Errorf("round %d: %d claims succeeded with %d tokens seen, want 1 and 1", round, claimed, len(tokens))
		}
	}
}

func TestConcurrentTakeoversOneWins(t *testing.T) {
	// Of concurrent takeovers of one abandoned record, exactly one claims
	// and the token grows by one.
	t.Parallel()
	s, _ := setup(t)
	first := claimAt(t, s, "k", "fp", t0)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int64
	)
	for range 20 {
		wg.Go(func() {
			c, err := s.Claim(context.Background(), &idem.ClaimParams{Scope: "s", Key: "k", Fingerprint: "fp", Now: t0.Add(lease), Lease: lease})
			if err != nil {
				t.Error(err)
				return
			}
			if c.Claimed {
				mu.Lock()
				winners = append(winners, c.Lease.Token)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 || winners[0] != first.Lease.Token+1 {
		t.Errorf("takeovers won = %v, want one with token %d", winners, first.Lease.Token+1)
	}
	if rec := lookupRecord(t, s, "k"); rec.Attempts != 2 {
		t.Errorf("attempts = %d, want 2", rec.Attempts)
	}
}

// setupEffects opens a store with an effects table and a Leased over it.
func setupEffects(t *testing.T, now func() time.Time) (*sqlitestore.Store, *idem.Leased) {
	t.Helper()
	s, _ := setup(t)
	if _, err := s.DB().Exec(`CREATE TABLE effects (name TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	l, err := idem.NewLeased(s, &idem.LeasedConfig{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

func countEffects(t *testing.T, s *sqlitestore.Store, name string) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM effects WHERE name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLocalStepWritesThroughTxFrom(t *testing.T) {
	// A local step reaches its transaction through sqlitestore.TxFrom, as
	// atomic work does; its effect and its recovery point commit together.
	// A step whose fn fails leaves neither; the retry runs it again, and a
	// step already recorded is not run again.
	t.Parallel()
	s, l := setupEffects(t, func() time.Time { return t0 })
	ctx := context.Background()
	req := idem.LeasedRequest{Scope: "s", Key: "k", Fingerprint: "fp"}
	runs := 0
	fail := true
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		if _, err := run.LocalStep(ctx, "debit", func(ctx context.Context) ([]byte, error) {
			runs++
			tx, ok := sqlitestore.TxFrom(ctx)
			if !ok {
				return nil, errors.New("TxFrom: no transaction in a local step")
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('debit')`); err != nil {
				return nil, err
			}
			return []byte("debited"), nil
		}); err != nil {
			return idem.Result{}, err
		}
		_, err := run.LocalStep(ctx, "second", func(ctx context.Context) ([]byte, error) {
			tx, _ := sqlitestore.TxFrom(ctx)
			if _, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('second')`); err != nil {
				return nil, err
			}
			if fail {
				return nil, errors.New("second step fails")
			}
			return nil, nil
		})
		if err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 201}, nil
	}
	if _, _, err := l.Do(ctx, req, work); err == nil || err.Error() != "second step fails" {
		t.Fatalf("first Do: %v, want the step's error", err)
	}
	if got := countEffects(t, s, "debit"); got != 1 {
		t.Errorf("debit effects = %d, want 1", got)
	}
	if got := countEffects(t, s, "second"); got != 0 {
		t.Errorf("effects of the failed step = %d, want 0", got)
	}
	var steps string
	if err := s.DB().QueryRow(`SELECT group_concat(name || '=' || output) FROM idem_steps`).Scan(&steps); err != nil || steps != "debit=debited" {
		t.Errorf("steps = %q, %v; want debit=debited", steps, err)
	}
	fail = false
	res, replayed, err := l.Do(ctx, req, work)
	if err != nil || replayed || res.Status != 201 {
		t.Fatalf("retry: %+v %v %v", res, replayed, err)
	}
	if runs != 1 || countEffects(t, s, "debit") != 1 || countEffects(t, s, "second") != 1 {
		t.Errorf("after the retry: debit ran %d times, effects debit %d second %d; want 1, 1, 1",
			runs, countEffects(t, s, "debit"), countEffects(t, s, "second"))
	}
	if sqlitestore.WriterSlotHeld(s) {
		t.Error("writer slot held after Do")
	}
}

func TestTxFromRefusesAForeignSQLTx(t *testing.T) {
	// TxFrom returns a step's *sql.Tx only while the step is open and only
	// for this package's steps: another *sql.Tx behind an idem.Tx is not
	// mistaken for one.
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, ok := sqlitestore.TxFrom(idem.WithTx(ctx, foreignTx{tx})); ok {
		t.Error("TxFrom accepted a *sql.Tx that is not a step's")
	}
}

type foreignTx struct{ tx any }

func (f foreignTx) Handle() any                                    { return f.tx }
func (foreignTx) Commit(context.Context, *idem.CommitParams) error { return nil }
func (foreignTx) Rollback(context.Context) error                   { return nil }

func TestLocalStepEndedUnderTheWorkRecordsNothing(t *testing.T) {
	// When the step's transaction ends under the work (here the work ends
	// it itself; SQLite does so after an interrupt or a full disk), Commit
	// fails and records no step, so the step runs again on retry.
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	c := claimAt(t, s, "k", "fp", t0)
	st, err := s.BeginStep(ctx, &idem.BeginStepParams{Lease: c.Lease, Name: "local", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := sqlitestore.TxFrom(idem.WithTx(ctx, foreignTx{st.Handle()}))
	if tx == nil {
		t.Fatal("TxFrom: no transaction for an open step's handle")
	}
	if _, err := tx.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, []byte("out")); err == nil {
		t.Error("Commit after the transaction ended: want an error")
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM idem_steps`).Scan(&n); err != nil || n != 0 {
		t.Errorf("steps = %d, %v; want 0", n, err)
	}
	if sqlitestore.WriterSlotHeld(s) {
		t.Error("writer slot held after a failed step Commit")
	}
	if err := st.Rollback(ctx); err != nil {
		t.Errorf("Rollback after Commit: %v", err)
	}
}

func TestClaimWaitsForAnOpenStep(t *testing.T) {
	// An open local step holds the writer: a takeover of its record waits
	// for it and then sees the step it recorded.
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	c := claimAt(t, s, "k", "fp", t0)
	st, err := s.BeginStep(ctx, &idem.BeginStepParams{Lease: c.Lease, Name: "local", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *idem.Claim, 1)
	go func() {
		c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "k", Fingerprint: "fp", Now: t0.Add(lease), Lease: lease})
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	select {
	case c := <-got:
		t.Fatalf("a takeover ran while a step was open: %+v", c)
	case <-time.After(100 * time.Millisecond):
	}
	if err := st.Commit(ctx, []byte("out")); err != nil {
		t.Fatal(err)
	}
	select {
	case c2 := <-got:
		if c2 == nil || !c2.Claimed || stepNames(c2.Steps) != "local=out;" {
			t.Errorf("takeover after the step = %+v, want claimed with the step", c2)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the takeover did not end within 30 s of the step's commit")
	}
}

func TestLeasedCommitEndsAtTheCallersDeadline(t *testing.T) {
	// A leased write whose COMMIT hangs returns ErrUnavailable at its
	// ctx's deadline and frees the writer slot, as atomic Commit does.
	t.Parallel()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), &sqlitestore.Config{BusyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := claimAt(t, s, "k", "fp", t0)
	wake := make(chan struct{})
	defer close(wake)
	sqlitestore.SetCommitHook(s, func() error { <-wake; return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: c.Lease, Now: t0, Duration: time.Hour})
	if !errors.Is(err, idem.ErrUnavailable) {
		t.Errorf("Heartbeat with a hung COMMIT: %v, want ErrUnavailable", err)
	}
	if sqlitestore.WriterSlotHeld(s) {
		t.Error("writer slot held after the deadline")
	}
}

func TestAtomicPathsTreatPendingAsLive(t *testing.T) {
	// A pending record is read by atomic paths as StatePending: Guard
	// answers in flight (it never runs the work nor replaces the record),
	// and the sweeper never deletes it, however late it runs.
	t.Parallel()
	now := t0
	s, l := setupEffects(t, func() time.Time { return now })
	ctx := context.Background()
	req := idem.LeasedRequest{Scope: "tenant", Key: "k", Fingerprint: "fp"}
	if _, _, err := l.Do(ctx, req, func(context.Context, *idem.Run) (idem.Result, error) {
		return idem.Result{}, errors.New("provider down")
	}); err == nil {
		t.Fatal("Do: want the work's error")
	}
	g, err := idem.New(s, &idem.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	_, _, err = g.Do(ctx, idem.Request{Scope: "tenant", Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
		ran = true
		return idem.Result{Status: 200}, nil
	})
	if !errors.Is(err, idem.ErrInFlight) || ran {
		t.Errorf("Guard.Do on a pending key: err = %v, ran = %v; want ErrInFlight without running", err, ran)
	}
	for _, at := range []time.Time{t0.Add(48 * time.Hour), idem.PendingExpiresAt.Add(-time.Nanosecond)} {
		if n, err := s.DeleteExpired(ctx, &idem.DeleteExpiredParams{Now: at, Limit: 100}); err != nil || n != 0 {
			t.Errorf("DeleteExpired at %v = %d, %v; want 0", at, n, err)
		}
	}
	abandoned, err := s.Abandoned(ctx, &idem.AbandonedParams{Now: now, Limit: 10})
	if err != nil || len(abandoned) != 1 || abandoned[0].State != idem.StatePending || abandoned[0].LastError != "provider down" {
		t.Errorf("Abandoned after the sweeps = %+v, %v; want the pending record", abandoned, err)
	}
	// The sweeper itself.
	sw, err := idem.NewSweeper(s, &idem.SweeperConfig{Now: func() time.Time { return t0.Add(365 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if abandoned, err := s.Abandoned(ctx, &idem.AbandonedParams{Now: now, Limit: 10}); err != nil || len(abandoned) != 1 {
		t.Errorf("pending records after a sweep a year later = %d, %v; want 1", len(abandoned), err)
	}
}

func TestAtomicRecordReplacingALeasedOneHasNoLeasedFields(t *testing.T) {
	// An atomic record written over an expired leased record keeps none of
	// its leased fields (its TTL included) but its token; a later claim's token is greater.
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "k", Fingerprint: "fp", Kind: "payout", TTL: time.Hour, Now: t0, Lease: lease})
	if err != nil || !c.Claimed || c.Record.TTL != time.Hour {
		t.Fatalf("claim = %+v, %v; want claimed with TTL 1h", c, err)
	}
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: c.Lease, Result: idem.Result{Status: 201}, Now: t0, ExpiresAt: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Second)
	_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx, &idem.CommitParams{Now: now, Record: &idem.Record{Scope: "s", Key: "k", Fingerprint: "atomic",
		State: idem.StateCompleted, Result: idem.Result{Status: 200}, CreatedAt: now, ExpiresAt: now.Add(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	rec := lookupRecord(t, s, "k")
	if rec.Kind != "" || rec.Input != nil || rec.Attempts != 0 || rec.LastError != "" || !rec.LeaseUntil.IsZero() || rec.TTL != 0 || rec.Fingerprint != "atomic" {
		t.Errorf("atomic record = %+v, want no leased fields", rec)
	}
	c2 := claimAt(t, s, "k", "fp", now.Add(time.Second))
	if !c2.Claimed || c2.Lease.Token <= c.Lease.Token {
		t.Errorf("claim after the atomic record expired: %+v, want a token above %d", c2, c.Lease.Token)
	}
}

package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The focused tests of leased mode on PostgreSQL: the rules of
// idem.LeasedStore as this store keeps them, and what only this store has
// (its SQL, its row locks, the atomic paths on the same table). The
// shared cases run in TestLeasedConformance.

var lt0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const lease = 30 * time.Second

func claim(t *testing.T, s *pgstore.Store, key, fp string, now time.Time) *idem.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: fp, Kind: "pay", Input: []byte("in"), Now: now, Lease: lease})
	if err != nil {
		t.Fatalf("Claim(%q) at %s: %v", key, now, err)
	}
	return c
}

func TestLeasedClaimLifecycle(t *testing.T) {
	// L1 and L3: a new claim, a refusal under a live lease or with another
	// fingerprint, a takeover after the lease with the steps saved so far,
	// completion, a replay, and a new record once the completed one has
	// expired, whose token is greater than any the key had.
	t.Parallel()
	s, pool, _ := setup(t, nil)
	ctx := context.Background()

	c := claim(t, s, "k", "fp", lt0)
	r := c.Record
	if !c.Claimed || r.State != idem.StatePending || r.Token != lt0.UnixMicro() || r.Attempts != 1 ||
		!r.LeaseUntil.Equal(lt0.Add(lease)) || !r.ExpiresAt.Equal(idem.PendingExpiresAt) || !r.CreatedAt.Equal(lt0) ||
		r.Kind != "pay" || string(r.Input) != "in" || r.Fingerprint != "fp" || c.Lease != (idem.Lease{Scope: "s", Key: "k", Token: r.Token}) || len(c.Steps) != 0 {
		t.Fatalf("first claim = %+v, record %+v", c, r)
	}
	first := c.Lease
	for _, name := range []string{"b", "a"} {
		if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: first, Name: name, Output: []byte("out-" + name), Now: lt0}); err != nil {
			t.Fatalf("SaveStep %s: %v", name, err)
		}
	}
	// Saving a name again replaces its output and keeps its place.
	if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: first, Name: "b", Output: []byte("out-b2"), Now: lt0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, &idem.ReleaseParams{Lease: first, Now: lt0, RetryAt: lt0.Add(time.Second), Error: "boom"}); err != nil {
		t.Fatal(err)
	}

	// Under the lease (RetryAt not reached) the key is refused.
	if c := claim(t, s, "k", "fp", lt0.Add(time.Second-time.Microsecond)); c.Claimed || c.Record.State != idem.StatePending || c.Record.LastError != "boom" {
		t.Fatalf("claim under the lease = %+v, want unclaimed pending with the last error", c)
	}
	// Another fingerprint never takes over.
	if c := claim(t, s, "k", "other", lt0.Add(time.Hour)); c.Claimed || c.Record.Fingerprint != "fp" {
		t.Fatalf("claim with another fingerprint = %+v, want unclaimed", c)
	}
	// From RetryAt on, the same fingerprint takes over, with the steps.
	c = claim(t, s, "k", "fp", lt0.Add(time.Second))
	if !c.Claimed || c.Record.Token != first.Token+1 || c.Record.Attempts != 2 || !c.Record.CreatedAt.Equal(lt0) || c.Record.LastError != "boom" {
		t.Fatalf("takeover = %+v, record %+v", c, c.Record)
	}
	want := []idem.Step{{Name: "b", Output: []byte("out-b2")}, {Name: "a", Output: []byte("out-a")}}
	if fmt.Sprint(c.Steps) != fmt.Sprint(want) {
		t.Errorf("steps = %q, want %q", c.Steps, want)
	}
	second := c.Lease

	// L2: the first holder writes nothing any more.
	for name, err := range fencedWrites(s, first, lt0.Add(2*time.Second)) {
		if !errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s of the old holder: %v, want ErrFenced", name, err)
		}
	}
	if n := countRows(t, pool, `SELECT count(*) FROM idem_records_steps WHERE name = 'late'`); n != 0 {
		t.Errorf("the old holder's step was written")
	}

	if err := s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: second, Now: lt0.Add(2 * time.Second), Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	res := idem.Result{Status: 201, Header: map[string][]string{"X": {"1"}}, Body: []byte("done")}
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: second, Result: res, Now: lt0.Add(3 * time.Second), ExpiresAt: lt0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM idem_records_steps`); n != 0 {
		t.Errorf("%d steps left after Complete, want 0", n)
	}
	// Completed: fenced for everyone, the holder included.
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: second, Result: res, Now: lt0, ExpiresAt: lt0.Add(time.Hour)}); !errors.Is(err, idem.ErrFenced) {
		t.Errorf("second Complete: %v, want ErrFenced", err)
	}
	c = claim(t, s, "k", "fp", lt0.Add(time.Hour-time.Microsecond))
	if c.Claimed || c.Record.State != idem.StateCompleted || c.Record.Result.Status != 201 || string(c.Record.Result.Body) != "done" ||
		c.Record.Result.Header["X"][0] != "1" || c.Record.LastError != "" || !c.Record.ExpiresAt.Equal(lt0.Add(time.Hour)) {
		t.Fatalf("claim of the completed record = %+v, record %+v", c, c.Record)
	}
	rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"})
	if err != nil || rec.Token != second.Token || rec.Attempts != 2 || rec.Kind != "pay" {
		t.Errorf("Lookup = %+v, %v", rec, err)
	}

	// Expired: a new record. A clock behind the old token still gets a
	// greater one (old token + 1), and a step left over by the old one is
	// deleted with it.
	if _, err := pool.Exec(ctx, `INSERT INTO idem_records_steps (scope, key, name, created_at) VALUES ('s', 'k', 'stale', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE idem_records SET expires_at = $1 WHERE key = 'k'`, lt0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	c = claim(t, s, "k", "fp2", lt0.Add(-time.Minute))
	if !c.Claimed || c.Record.Token != second.Token+1 || c.Record.Attempts != 1 || c.Record.Fingerprint != "fp2" ||
		!c.Record.CreatedAt.Equal(lt0.Add(-time.Minute)) || c.Record.Result.Status != 0 || len(c.Steps) != 0 {
		t.Fatalf("claim of the expired record = %+v, record %+v", c, c.Record)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM idem_records_steps`); n != 0 {
		t.Errorf("%d steps of the expired record left, want 0", n)
	}
}

// fencedWrites tries every write of holder l and returns their errors.
func fencedWrites(s *pgstore.Store, l idem.Lease, now time.Time) map[string]error {
	ctx := context.Background()
	errs := map[string]error{
		"Heartbeat": s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: l, Now: now, Duration: time.Minute}),
		"SaveStep":  s.SaveStep(ctx, &idem.SaveStepParams{Lease: l, Name: "late", Output: []byte("x"), Now: now}),
		"Release":   s.Release(ctx, &idem.ReleaseParams{Lease: l, Now: now, RetryAt: now, Error: "late"}),
		"Complete":  s.Complete(ctx, &idem.CompleteParams{Lease: l, Result: idem.Result{Status: 500}, Now: now, ExpiresAt: now.Add(time.Hour)}),
	}
	st, err := s.BeginStep(ctx, &idem.BeginStepParams{Lease: l, Name: "late", Now: now})
	if st != nil {
		_ = st.Rollback(ctx)
	}
	errs["BeginStep"] = err
	return errs
}

func TestLeasedNilAndEmptyBytes(t *testing.T) {
	// Input and step outputs come back as they went in: nil as nil, empty
	// as empty.
	t.Parallel()
	s, _, _ := setup(t, nil)
	ctx := context.Background()
	for i, in := range [][]byte{nil, {}} {
		key := fmt.Sprint("k", i)
		c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Input: in, Now: lt0, Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		if (c.Record.Input == nil) != (in == nil) {
			t.Errorf("Input %#v came back %#v", in, c.Record.Input)
		}
		if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: "x", Output: in, Now: lt0}); err != nil {
			t.Fatal(err)
		}
		c = claim(t, s, key, "fp", lt0.Add(lease))
		if len(c.Steps) != 1 || (c.Steps[0].Output == nil) != (in == nil) {
			t.Errorf("step output %#v came back %+v", in, c.Steps)
		}
	}
}

func TestLeasedConcurrentClaims(t *testing.T) {
	// L1: of concurrent claims of one key, exactly one wins, for a new
	// record and for a takeover alike; the others see the winner's record.
	t.Parallel()
	s, _, _ := setup(t, &pgstore.Config{})
	const callers = 40
	for round := range 10 {
		key := fmt.Sprint("race-", round)
		for phase, now := range []time.Time{lt0, lt0.Add(lease)} {
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				wins   []*idem.Claim
				tokens = map[int64]int{}
			)
			start := make(chan struct{})
			for range callers {
				wg.Go(func() {
					<-start
					c, err := s.Claim(context.Background(), &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Now: now, Lease: lease})
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("Claim: %v", err)
						return
					}
					tokens[c.Record.Token]++
					if c.Claimed {
						wins = append(wins, c)
					}
				})
			}
			close(start)
			wg.Wait()
			if len(wins) != 1 {
				t.Fatalf("round %d phase %d: %d claims won, want 1", round, phase, len(wins))
			}
			if len(tokens) != 1 || tokens[wins[0].Lease.Token] != callers {
				t.Errorf("round %d phase %d: tokens seen %v, want all %d", round, phase, tokens, wins[0].Lease.Token)
			}
			if want := phase + 1; wins[0].Record.Attempts != want {
				t.Errorf("round %d phase %d: attempts %d, want %d", round, phase, wins[0].Record.Attempts, want)
			}
		}
	}
}

func TestLeasedLocalStep(t *testing.T) {
	// A local step writes through pgstore.TxFrom, and its write and its
	// recovery point commit together; a retry resumes after it without
	// running it again; the step's pgx.Tx refuses Commit and Rollback
	// and is closed once the step has ended.
	t.Parallel()
	s, pool, _ := setup(t, nil)
	l, err := idem.NewLeased(s, &idem.LeasedConfig{Now: func() time.Time { return lt0 }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var kept pgx.Tx
	calls := 0
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		out, err := run.LocalStep(ctx, "debit", func(ctx context.Context) ([]byte, error) {
			calls++
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return nil, errors.New("no pgstore transaction in a local step")
			}
			kept = tx
			if err := tx.Commit(ctx); err == nil || errors.Is(err, pgx.ErrTxClosed) {
				return nil, fmt.Errorf("Commit of the step's tx: %v, want a refusal", err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ('debit')`); err != nil {
				return nil, err
			}
			return []byte("debited"), nil
		})
		if err != nil {
			return idem.Result{}, err
		}
		if run.Attempt == 1 {
			return idem.Result{}, errors.New("provider down")
		}
		return idem.Result{Status: 201, Body: out}, nil
	}
	req := idem.LeasedRequest{Scope: "s", Key: "pay-1", Fingerprint: "fp"}
	if _, _, err := l.Do(ctx, req, work); err == nil || !strings.Contains(err.Error(), "provider down") {
		t.Fatalf("first Do: %v, want the work's error", err)
	}
	if _, err := kept.Exec(ctx, `SELECT 1`); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("the step's tx after the step: %v, want pgx.ErrTxClosed", err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM effects`); n != 1 {
		t.Errorf("effects after the first attempt = %d, want 1", n)
	}
	res, replayed, err := l.Do(ctx, req, work)
	if err != nil || replayed || string(res.Body) != "debited" {
		t.Fatalf("retry: %q replayed=%v err=%v", res.Body, replayed, err)
	}
	if calls != 1 || countRows(t, pool, `SELECT count(*) FROM effects`) != 1 {
		t.Errorf("the local step ran %d times (effects %d), want once", calls, countRows(t, pool, `SELECT count(*) FROM effects`))
	}
}

func TestLeasedLocalStepRollsBack(t *testing.T) {
	// A local step that fails, or that ends the transaction itself,
	// records nothing; its writes roll back with it (when it did not
	// commit them itself).
	t.Parallel()
	s, pool, _ := setup(t, nil)
	ctx := context.Background()
	c := claim(t, s, "k", "fp", lt0)
	st, err := s.BeginStep(ctx, &idem.BeginStepParams{Lease: c.Lease, Name: "a", Now: lt0})
	if err != nil {
		t.Fatal(err)
	}
	tx := st.Handle().(pgx.Tx)
	if _, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ('a')`); err != nil {
		t.Fatal(err)
	}
	if err := st.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	st, err = s.BeginStep(ctx, &idem.BeginStepParams{Lease: c.Lease, Name: "b", Now: lt0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Handle().(pgx.Tx).Exec(ctx, `ROLLBACK; BEGIN`); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(ctx, []byte("x")); err == nil || !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("Commit of a step that ended its transaction: %v, want pgx.ErrTxClosed", err)
	}
	_ = st.Rollback(ctx)
	if n := countRows(t, pool, `SELECT count(*) FROM idem_records_steps`); n != 0 {
		t.Errorf("%d steps recorded, want 0", n)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM effects`); n != 0 {
		t.Errorf("%d effects, want 0", n)
	}
	// The key is not left locked: the holder goes on.
	if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: "c", Now: lt0}); err != nil {
		t.Errorf("SaveStep after the failed steps: %v", err)
	}
}

func TestLeasedStepHoldsOffTakeover(t *testing.T) {
	// L2 with a local step in progress: it holds the record's row, so a
	// claim after the lease has ended waits for it, then takes over with
	// its recovery point; the old holder's step committed before the
	// takeover, never after.
	t.Parallel()
	s, pool, _ := setup(t, nil)
	ctx := context.Background()
	c := claim(t, s, "k", "fp", lt0)
	st, err := s.BeginStep(ctx, &idem.BeginStepParams{Lease: c.Lease, Name: "debit", Now: lt0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Handle().(pgx.Tx).Exec(ctx, `INSERT INTO effects (name) VALUES ('debit')`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		c   *idem.Claim
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "k", Fingerprint: "fp", Now: lt0.Add(lease), Lease: lease})
		done <- result{c, err}
	}()
	waitForLockWait(t, pool)
	select {
	case r := <-done:
		t.Fatalf("the claim returned while the step held the row: %+v, %v", r.c, r.err)
	default:
	}
	if err := st.Commit(ctx, []byte("debited")); err != nil {
		t.Fatalf("Commit of the step: %v", err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not return after the step committed")
	}
	if r.err != nil || !r.c.Claimed || len(r.c.Steps) != 1 || string(r.c.Steps[0].Output) != "debited" {
		t.Fatalf("takeover after the step = %+v, %v; want claimed with the step", r.c, r.err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM effects`); n != 1 {
		t.Errorf("effects = %d, want 1", n)
	}
}

// waitForLockWait waits, at most 30 s, until a statement on the store in
// pool's schema waits for a lock.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if !waitForLockWaiters(t, pool, 1, nil) {
		t.Fatal("no backend waited for the row lock within 30 s")
	}
}

// waitForLockWaiters waits, at most 30 s, until n backends wait for a lock
// in a statement that names the schema of pool's connections (the
// store's statements qualify its tables), and returns true; or until done
// is closed, and returns false.
func waitForLockWaiters(t *testing.T, pool *pgxpool.Pool, n int, done <-chan struct{}) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var got int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND datname = current_database() AND strpos(query, '"' || current_schema() || '"') > 0`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return true
		}
		select {
		case <-done:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

func TestLeasedSaveStepHoldsOffTakeover(t *testing.T) {
	// L2 for SaveStep: its fence check and its write are one, so a step
	// acknowledged to a holder is seen by its successor, and a step the
	// successor did not see is refused to the holder. The step's write is
	// held up (another transaction holds the step's key) while a claim
	// after the lease's end runs.
	t.Parallel()
	s, pool, _ := setup(t, nil)
	ctx := context.Background()
	c := claim(t, s, "k", "fp", lt0)
	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, `INSERT INTO idem_records_steps (scope, key, name, created_at) VALUES ('s', 'k', 'n', now())`); err != nil {
		t.Fatal(err)
	}
	saved := make(chan error, 1)
	go func() {
		saved <- s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: "n", Output: []byte("x"), Now: lt0})
	}()
	waitForLockWait(t, pool)
	type result struct {
		c   *idem.Claim
		err error
	}
	claimed := make(chan result, 1)
	returned := make(chan struct{})
	go func() {
		c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "k", Fingerprint: "fp", Now: lt0.Add(lease), Lease: lease})
		claimed <- result{c, err}
		close(returned)
	}()
	waitForLockWaiters(t, pool, 2, returned) // the claim waits, or has returned
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	saveErr := <-saved
	r := <-claimed
	if r.err != nil || !r.c.Claimed {
		t.Fatalf("takeover = %+v, %v", r.c, r.err)
	}
	seen := len(r.c.Steps) == 1 && string(r.c.Steps[0].Output) == "x"
	switch {
	case saveErr == nil && !seen:
		t.Errorf("SaveStep succeeded after the takeover, which did not see it (steps %q)", r.c.Steps)
	case saveErr != nil && (seen || !errors.Is(saveErr, idem.ErrFenced)):
		t.Errorf("SaveStep: %v with the step seen=%v, want ErrFenced and unseen", saveErr, seen)
	}
}

func TestLeasedStaleHolderWritesNothing(t *testing.T) {
	// L2 under concurrency: a holder taken over keeps writing from many
	// goroutines while its successor works; none of its writes applies,
	// and every one of the successor's does.
	t.Parallel()
	s, pool, _ := setup(t, nil)
	ctx := context.Background()
	old := claim(t, s, "k", "fp", lt0).Lease
	cur := claim(t, s, "k", "fp", lt0.Add(lease)).Lease
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				for name, err := range fencedWrites(s, old, lt0.Add(lease)) {
					if !errors.Is(err, idem.ErrFenced) {
						t.Errorf("stale %s: %v, want ErrFenced", name, err)
					}
				}
				name := fmt.Sprintf("s%d-%d", g, i)
				if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: cur, Name: name, Now: lt0}); err != nil {
					t.Errorf("SaveStep of the holder: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := countRows(t, pool, `SELECT count(*) FROM idem_records_steps WHERE name = 'late'`); n != 0 {
		t.Errorf("%d stale steps written, want 0", n)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM idem_records_steps`); n != 80 {
		t.Errorf("%d steps of the holder, want 80", n)
	}
	rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"})
	if err != nil || rec.Token != cur.Token || rec.State != idem.StatePending || rec.LastError != "" || !rec.LeaseUntil.Equal(lt0.Add(2*lease)) {
		t.Errorf("record = %+v, %v; want untouched by the stale holder", rec, err)
	}
}

func TestLeasedAbandoned(t *testing.T) {
	// Abandoned returns pending records whose lease ended, longest ended
	// first, at most Limit; never a live lease nor a completed record.
	t.Parallel()
	s, _, _ := setup(t, nil)
	ctx := context.Background()
	for i, off := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second, time.Hour} {
		claim(t, s, fmt.Sprint("p", i), "fp", lt0.Add(off-lease))
	}
	done := claim(t, s, "done", "fp", lt0.Add(-time.Hour))
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: done.Lease, Result: idem.Result{Status: 200}, Now: lt0, ExpiresAt: lt0}); err != nil {
		t.Fatal(err)
	}
	now := lt0.Add(3 * time.Second)
	for limit, want := range map[int]string{0: "", 2: "p1 p2", 10: "p1 p2 p0"} {
		recs, err := s.Abandoned(ctx, &idem.AbandonedParams{Now: now, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range recs {
			keys = append(keys, r.Key)
			if r.State != idem.StatePending || r.Token == 0 || r.Kind != "pay" {
				t.Errorf("abandoned record %+v", r)
			}
		}
		if got := strings.Join(keys, " "); got != want {
			t.Errorf("Abandoned(limit %d) = %q, want %q", limit, got, want)
		}
	}
	// The partial index on the lease_until of pending records exists. It
	// is looked up in this test's schema only: pg_indexes would decompile
	// every index of the database, and fails on one that another test's
	// schema drops meanwhile.
	var pred string
	if err := s.Pool().QueryRow(ctx, `SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname = 'idem_records_pending_idx' AND c.relnamespace = current_schema()::regnamespace`).Scan(&pred); err != nil || !strings.Contains(pred, "state = 'pending'") {
		t.Errorf("the partial index on pending records: predicate %q, %v", pred, err)
	}
}

func TestLeasedAndAtomicOnOneKey(t *testing.T) {
	// A key claimed in leased mode is in flight to atomic mode (a route
	// that changed modes): Guard.Do answers ErrInFlight and runs nothing,
	// the sweeper never deletes the pending record, and an atomic work
	// that began before the claim cannot commit over it (its effect rolls
	// back).
	t.Parallel()
	s, pool, _ := setup(t, nil)
	ctx := context.Background()
	g, err := idem.New(s, &idem.Config{Now: func() time.Time { return lt0 }})
	if err != nil {
		t.Fatal(err)
	}
	c := claim(t, s, "leased", "fp", lt0)
	ran := false
	_, _, err = g.Do(ctx, idem.Request{Scope: "s", Key: "leased", Fingerprint: "fp"}, func(context.Context) (idem.Result, error) {
		ran = true
		return idem.Result{Status: 200}, nil
	})
	if !errors.Is(err, idem.ErrInFlight) || ran {
		t.Errorf("Guard.Do on a pending key: ran=%v err=%v, want ErrInFlight", ran, err)
	}
	for _, now := range []time.Time{lt0.Add(lease), time.Date(2199, 12, 31, 0, 0, 0, 0, time.UTC)} {
		if n, err := s.DeleteExpired(ctx, &idem.DeleteExpiredParams{Now: now, Limit: 100}); err != nil || n != 0 {
			t.Errorf("DeleteExpired at %s = %d, %v; want 0", now, n, err)
		}
	}
	if rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "leased"}); err != nil || rec.State != idem.StatePending || rec.Token != c.Lease.Token {
		t.Errorf("after the sweeps: %+v, %v; want the pending record", rec, err)
	}

	// An atomic work on a free key, while a leased claim of the key
	// commits: the atomic commit conflicts, its effect rolls back, and
	// the call is answered in flight.
	_, _, err = g.Do(ctx, idem.Request{Scope: "s", Key: "raced", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := pgstore.TxFrom(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ('atomic')`); err != nil {
			return idem.Result{}, err
		}
		if c := claim(t, s, "raced", "fp", lt0); !c.Claimed {
			return idem.Result{}, fmt.Errorf("leased claim during the atomic work: %+v", c)
		}
		return idem.Result{Status: 200}, nil
	})
	if !errors.Is(err, idem.ErrInFlight) {
		t.Errorf("atomic work raced by a leased claim: %v, want ErrInFlight", err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM effects`); n != 0 {
		t.Errorf("effects = %d, want 0 (rolled back)", n)
	}
}

func TestLeasedUnavailable(t *testing.T) {
	// A server that cannot be reached fails every call with an error
	// matching ErrUnavailable, never ErrFenced nor a claim.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", &pgstore.Config{Schema: "x", SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := idem.Lease{Scope: "s", Key: "k", Token: 1}
	_, claimErr := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "k", Now: lt0, Lease: lease})
	_, abErr := s.Abandoned(ctx, &idem.AbandonedParams{Now: lt0, Limit: 1})
	errs := fencedWrites(s, l, lt0)
	errs["Claim"], errs["Abandoned"] = claimErr, abErr
	for name, err := range errs {
		if !errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
}

func TestLeasedLongestTableNames(t *testing.T) {
	// The longest table name Config takes gets every object of leased
	// mode under its full name (PostgreSQL would truncate a longer one
	// silently), and works.
	t.Parallel()
	table := strings.Repeat("t", 48)
	s, pool, schema := setup(t, &pgstore.Config{Table: table})
	var names []string
	rows, err := pool.Query(context.Background(), `SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE nspname = $1 AND relname LIKE 'ttt%' ORDER BY relname`, schema)
	if err != nil {
		t.Fatal(err)
	}
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "_expires_at_idx", "_migrations", "_pending_idx", "_pkey", "_steps", "_steps_pkey", "_steps_seq_seq"} {
		found := false
		for _, n := range names {
			found = found || n == table+suffix
		}
		if !found {
			t.Errorf("no object %s…%s; have %q", table[:4], suffix, names)
		}
	}
	c := claim(t, s, "k", "fp", lt0)
	if err := s.SaveStep(context.Background(), &idem.SaveStepParams{Lease: c.Lease, Name: "a", Output: []byte("x"), Now: lt0}); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, "k", "fp", lt0.Add(lease)); !c.Claimed || len(c.Steps) != 1 || !bytes.Equal(c.Steps[0].Output, []byte("x")) {
		t.Errorf("takeover = %+v", c)
	}
}

func TestLeasedMigratesAnExistingTable(t *testing.T) {
	// A table created by version 1 (an older release), with records in
	// it, gets migration 2: its records read as atomic ones, with no
	// lease, and are replayed and claimed as usual.
	t.Parallel()
	pgtest.Require(t)
	schema, dsn := pgtest.Schema(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, sql := range []string{
		`CREATE TABLE idem_records_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		`INSERT INTO idem_records_migrations (version) VALUES (1)`,
		`CREATE TABLE idem_records (scope text NOT NULL, key text NOT NULL, fingerprint text NOT NULL, state text NOT NULL,
			status integer NOT NULL, headers jsonb, body bytea NOT NULL, created_at timestamptz NOT NULL,
			expires_at timestamptz NOT NULL, CONSTRAINT idem_records_pkey PRIMARY KEY (scope, key))`,
		`CREATE INDEX idem_records_expires_at_idx ON idem_records (expires_at)`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO idem_records VALUES ('s', 'old', 'fp', 'completed', 201, NULL, 'b', $1, $2)`, lt0, lt0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	c := claim(t, s, "old", "fp", lt0)
	if c.Claimed || c.Record.State != idem.StateCompleted || c.Record.Token != 0 || !c.Record.LeaseUntil.IsZero() || c.Record.Attempts != 0 || c.Record.TTL != 0 || string(c.Record.Result.Body) != "b" {
		t.Errorf("claim of an old record = %+v, record %+v", c, c.Record)
	}
	if c := claim(t, s, "old", "fp", lt0.Add(time.Hour)); !c.Claimed || c.Record.Token != lt0.Add(time.Hour).UnixMicro() {
		t.Errorf("claim of the old record once expired = %+v", c)
	}
}

func TestLeasedMigratesAVersion3Table(t *testing.T) {
	// A table at version 3 (leased mode, before records kept their TTL)
	// with a pending record gets migration 4: the record reads with TTL 0
	// ("unknown"), a takeover completes it with its own TTL, and a new
	// claim's TTL is kept and read back.
	t.Parallel()
	pgtest.Require(t)
	schema, dsn := pgtest.Schema(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`ALTER TABLE idem_records DROP COLUMN ttl_us`,
		`DROP TABLE idem_records_outbox`,
		`DELETE FROM idem_records_migrations WHERE version >= 4`,
		`INSERT INTO idem_records (scope, key, fingerprint, state, status, headers, body, created_at, expires_at,
			token, lease_until, kind, input, attempts, last_error)
		VALUES ('s', 'old', 'fp', 'pending', 0, NULL, '', '2026-01-02T03:04:05Z', '2200-01-01T00:00:00Z',
			7, '2026-01-02T03:04:05Z', 'pay', 'in', 1, 'crashed')`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	s, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "old"})
	if err != nil || rec.State != idem.StatePending || rec.Token != 7 || rec.TTL != 0 {
		t.Fatalf("version 3 pending record after the upgrade = %+v, %v; want pending, token 7, TTL 0", rec, err)
	}
	l, err := idem.NewLeased(s, &idem.LeasedConfig{Now: func() time.Time { return lt0 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Do(ctx, idem.LeasedRequest{Scope: "s", Key: "old", Fingerprint: "fp", TTL: time.Hour},
		func(context.Context, *idem.Run) (idem.Result, error) { return idem.Result{Status: 201}, nil }); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "old"}); err != nil || rec.State != idem.StateCompleted || !rec.ExpiresAt.Equal(lt0.Add(time.Hour)) {
		t.Errorf("old record completed by a takeover = %+v, %v; want completed, expiring at %s (the taker's TTL: it had none)", rec, err, lt0.Add(time.Hour))
	}
	c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: "new", Fingerprint: "fp", TTL: 72 * time.Hour, Now: lt0, Lease: lease})
	if err != nil || !c.Claimed || c.Record.TTL != 72*time.Hour {
		t.Fatalf("new claim on the upgraded table = %+v, %v; want claimed with TTL 72h", c, err)
	}
	if rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "new"}); err != nil || rec.TTL != 72*time.Hour {
		t.Errorf("new record read back = %+v, %v; want TTL 72h", rec, err)
	}
}

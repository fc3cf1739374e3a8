package batch_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqlitestore"
)

// ledger is a test work over memstore: each item adds its Value to the
// counter named by its id, through the item's transaction, and counts the
// applications that committed.
type ledger struct {
	store *memstore.Store
	guard *idem.Guard
	ran   atomic.Int64 // executions of the work, committed or not
}

func setup(t *testing.T) *ledger {
	t.Helper()
	s := memstore.New()
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &ledger{store: s, guard: g}
}

func (l *ledger) apply(ctx context.Context, it batch.Item[int]) (idem.Result, error) {
	l.ran.Add(1)
	tx, ok := memstore.TxFrom(ctx)
	if !ok {
		return idem.Result{}, errors.New("no transaction")
	}
	if it.Value < 0 {
		tx.Set("written-before-refusal/"+it.ID, "x") // must roll back
		return idem.Result{}, batch.Refuse(fmt.Errorf("negative value %d", it.Value))
	}
	old, _ := tx.Get("count/" + it.ID)
	n, _ := strconv.Atoi(old)
	tx.Set("count/"+it.ID, strconv.Itoa(n+1))
	return idem.Result{Status: 201, Body: []byte("ok " + it.ID)}, nil
}

// applied returns how many times item id's effect committed.
func (l *ledger) applied(id string) int {
	v, _ := l.store.Value("count/" + id)
	n, _ := strconv.Atoi(v)
	return n
}

func items(n int) []batch.Item[int] {
	out := make([]batch.Item[int], n)
	for i := range out {
		id := "row-" + strconv.Itoa(i)
		out[i] = batch.Item[int]{ID: id, Body: []byte(id + ":" + strconv.Itoa(i)), Value: i}
	}
	return out
}

func cfg(id string) *batch.Config { return &batch.Config{BatchID: id, Scope: "test-batch"} }

func TestRerunAppliesNothingTwice(t *testing.T) {
	t.Parallel()
	l := setup(t)
	ctx := context.Background()
	its := items(50)
	first, err := batch.Run(ctx, l.guard, cfg("b1"), its, l.apply)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := first.Counts, (batch.Counts{Applied: 50}); got != want || !first.OK() {
		t.Fatalf("first run: counts %+v, want %+v", got, want)
	}
	for i, ir := range first.Items {
		if ir.ID != its[i].ID || ir.Outcome != batch.Applied || ir.Replayed || string(ir.Result.Body) != "ok "+its[i].ID {
			t.Fatalf("first run, item %d: %+v", i, ir)
		}
	}
	second, err := batch.Run(ctx, l.guard, cfg("b1"), its, l.apply)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := second.Counts, (batch.Counts{Replayed: 50}); got != want {
		t.Fatalf("second run: counts %+v, want %+v", got, want)
	}
	for i, ir := range second.Items {
		if ir.Outcome != batch.Replayed || !ir.Replayed || ir.Result.Status != 201 || string(ir.Result.Body) != "ok "+its[i].ID {
			t.Fatalf("second run, item %d: %+v; want the first run's result replayed", i, ir)
		}
	}
	if got := l.ran.Load(); got != 50 {
		t.Errorf("the work ran %d times over two runs, want 50", got)
	}
	for _, it := range its {
		if n := l.applied(it.ID); n != 1 {
			t.Errorf("item %s applied %d times, want 1", it.ID, n)
		}
	}
	// Another batch id is another batch: the same item ids run again.
	other, err := batch.Run(ctx, l.guard, cfg("b2"), its[:3], l.apply)
	if err != nil || other.Applied != 3 {
		t.Errorf("another batch: %+v, %v; want 3 applied", other, err)
	}
}

// A run interrupted part way (the context ends) reports the items it did
// not start as Failed; the re-run replays what committed and runs the rest.
func TestInterruptedRunIsFinishedByARerun(t *testing.T) {
	t.Parallel()
	l := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	its := items(40)
	rep, err := batch.Run(ctx, l.guard, &batch.Config{BatchID: "b", Scope: "test-batch",
		Progress: func(p batch.Progress) {
			if p.Done == 15 {
				cancel()
			}
		}}, its, l.apply)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if rep.Applied != 15 || rep.Failed != 25 || rep.Applied+rep.Failed != len(its) {
		t.Fatalf("interrupted run: %+v, want 15 applied and 25 failed", rep.Counts)
	}
	for _, ir := range rep.Items[15:] {
		if ir.Outcome != batch.Failed || !errors.Is(ir.Err, context.Canceled) {
			t.Fatalf("item not run: %+v, want Failed with context.Canceled", ir)
		}
	}
	rep, err = batch.Run(context.Background(), l.guard, cfg("b"), its, l.apply)
	if err != nil || rep.Replayed != 15 || rep.Applied != 25 {
		t.Fatalf("re-run: %+v, %v; want 15 replayed, 25 applied", rep.Counts, err)
	}
	for _, it := range its {
		if n := l.applied(it.ID); n != 1 {
			t.Errorf("item %s applied %d times, want 1", it.ID, n)
		}
	}
}

func TestRefusalsAreRecordedAndReplayed(t *testing.T) {
	t.Parallel()
	l := setup(t)
	ctx := context.Background()
	its := items(6)
	its[2].Value, its[4].Value = -1, -7
	// A Result of 400 or more is a refusal too, committed with its writes.
	apply := func(ctx context.Context, it batch.Item[int]) (idem.Result, error) {
		if it.ID == "row-5" {
			l.ran.Add(1)
			return idem.Result{Status: 409, Body: []byte("row-5 conflicts")}, nil
		}
		return l.apply(ctx, it)
	}
	rep, err := batch.Run(ctx, l.guard, cfg("b"), its, apply)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Counts, (batch.Counts{Applied: 3, Refused: 3}); got != want || rep.OK() {
		t.Fatalf("counts %+v, want %+v (and not OK)", got, want)
	}
	for i, want := range map[int]string{2: "negative value -1", 4: "negative value -7", 5: "row-5 conflicts"} {
		ir := rep.Items[i]
		if ir.Outcome != batch.Refused || ir.Replayed || ir.Reason != want {
			t.Errorf("item %d: %+v, want refused now with reason %q", i, ir, want)
		}
	}
	if rep.Items[2].Result.Status != batch.StatusRefused {
		t.Errorf("refused item's status %d, want %d", rep.Items[2].Result.Status, batch.StatusRefused)
	}
	if _, ok := l.store.Value("written-before-refusal/row-2"); ok {
		t.Error("the writes of a work that refused its item were committed")
	}
	ran := l.ran.Load()
	rep, err = batch.Run(ctx, l.guard, cfg("b"), its, apply)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Counts, (batch.Counts{Replayed: 3, Refused: 3}); got != want {
		t.Fatalf("re-run: counts %+v, want %+v", got, want)
	}
	if ir := rep.Items[4]; ir.Outcome != batch.Refused || !ir.Replayed || ir.Reason != "negative value -7" {
		t.Errorf("re-run of a refused item: %+v, want its refusal replayed", ir)
	}
	if got := l.ran.Load(); got != ran {
		t.Errorf("the re-run ran the work %d times, want 0 (refusals are replayed)", got-ran)
	}
}

// The same item id with other content in the same batch is refused as a
// mismatch and runs nothing, in a re-run and within one run.
func TestMismatchIsRefusedAndRunsNothing(t *testing.T) {
	t.Parallel()
	l := setup(t)
	ctx := context.Background()
	its := items(3)
	if _, err := batch.Run(ctx, l.guard, cfg("b"), its, l.apply); err != nil {
		t.Fatal(err)
	}
	changed := append([]batch.Item[int](nil), its...)
	changed[1].Body, changed[1].Value = []byte("row-1:changed"), 99
	// And twice the same new id, with two contents, in one run.
	changed = append(changed, batch.Item[int]{ID: "dup", Body: []byte("a")}, batch.Item[int]{ID: "dup", Body: []byte("b")})
	ran := l.ran.Load()
	rep, err := batch.Run(ctx, l.guard, cfg("b"), changed, l.apply)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Counts, (batch.Counts{Applied: 1, Replayed: 2, Refused: 2}); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	for _, i := range []int{1, 4} {
		ir := rep.Items[i]
		if ir.Outcome != batch.Refused || !errors.Is(ir.Err, idem.ErrMismatch) || ir.Reason == "" {
			t.Errorf("item %d: %+v, want refused as a mismatch", i, ir)
		}
	}
	if got := l.ran.Load() - ran; got != 1 {
		t.Errorf("the work ran %d times, want 1 (the first \"dup\")", got)
	}
	if n := l.applied("row-1"); n != 1 {
		t.Errorf("row-1 applied %d times, want 1", n)
	}
}

func TestProgressIsCalledAfterEachItem(t *testing.T) {
	t.Parallel()
	l := setup(t)
	its := items(20)
	its[7].Value = -1
	var got []batch.Progress
	rep, err := batch.Run(context.Background(), l.guard, &batch.Config{BatchID: "p", Scope: "s", Concurrency: 4,
		Progress: func(p batch.Progress) { got = append(got, p) }}, its, l.apply)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(its) {
		t.Fatalf("Progress called %d times, want %d", len(got), len(its))
	}
	for i, p := range got {
		sum := p.Applied + p.Replayed + p.Refused + p.Failed
		if p.Done != i+1 || p.Total != len(its) || sum != p.Done {
			t.Errorf("call %d: %+v; want Done %d of %d, counts summing to Done", i, p, i+1, len(its))
		}
	}
	if last := got[len(got)-1]; last.Counts != rep.Counts || last.Refused != 1 {
		t.Errorf("last progress %+v, report %+v; want equal, with 1 refused", last.Counts, rep.Counts)
	}
}

// Many goroutines, and two runs of the same batch at once, on a real
// store: every item is applied once, the other run replays it (or waits
// while it is in flight).
func TestConcurrentRunsApplyEachItemOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "batch.db"), &sqlitestore.Config{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE effects (id TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(ctx context.Context, it batch.Item[int]) (idem.Result, error) {
		tx, ok := sqlitestore.TxFrom(ctx)
		if !ok {
			return idem.Result{}, errors.New("no transaction")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO effects (id) VALUES (?)`, it.ID)
		return idem.Result{Status: 201}, err
	}
	its := items(300)
	reps := make([]*batch.Report, 2)
	var wg sync.WaitGroup
	for r := range reps {
		wg.Go(func() {
			var err error
			reps[r], err = batch.Run(ctx, g, &batch.Config{BatchID: "c", Scope: "s", Concurrency: 6}, its, apply)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for r, rep := range reps {
		if rep.Failed != 0 || rep.Refused != 0 || rep.Applied+rep.Replayed != len(its) {
			t.Errorf("run %d: %+v, want every item applied or replayed", r, rep.Counts)
		}
	}
	if got := reps[0].Applied + reps[1].Applied; got != len(its) {
		t.Errorf("the two runs applied %d items in all, want %d", got, len(its))
	}
	rows, err := s.DB().QueryContext(ctx, `SELECT id, count(*) FROM effects GROUP BY id HAVING count(*) <> 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		_ = rows.Scan(&id, &n)
		t.Errorf("item %s applied %d times", id, n)
	}
	var total int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM effects`).Scan(&total); err != nil || total != len(its) {
		t.Errorf("effects: %d (%v), want %d", total, err, len(its))
	}
}

// failingStore fails Begin for the keys it is told to, as a store that
// is down does.
type failingStore struct {
	idem.Store
	fail func(key string) bool
}

func (f failingStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if f.fail(p.Key) {
		return nil, nil, fmt.Errorf("%w: connection refused", idem.ErrUnavailable)
	}
	return f.Store.Begin(ctx, p)
}

// A store failure, and a work that fails, record nothing: the items are
// Failed, and a re-run applies them.
func TestFailuresAreRetryable(t *testing.T) {
	t.Parallel()
	l := setup(t)
	down := true
	g, err := idem.New(failingStore{l.store, func(key string) bool { return down && key == batch.Key("f", "row-1") }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	apply := func(ctx context.Context, it batch.Item[int]) (idem.Result, error) {
		if it.ID == "row-3" && down {
			return idem.Result{}, boom
		}
		return l.apply(ctx, it)
	}
	its := items(5)
	rep, err := batch.Run(context.Background(), g, cfg("f"), its, apply)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Counts, (batch.Counts{Applied: 3, Failed: 2}); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if ir := rep.Items[1]; ir.Outcome != batch.Failed || !errors.Is(ir.Err, idem.ErrUnavailable) {
		t.Errorf("item on a failing store: %+v, want Failed with ErrUnavailable", ir)
	}
	if ir := rep.Items[3]; ir.Outcome != batch.Failed || !errors.Is(ir.Err, boom) || ir.Reason != "boom" {
		t.Errorf("item whose work failed: %+v, want Failed with the work's error", ir)
	}
	down = false
	rep, err = batch.Run(context.Background(), g, cfg("f"), its, apply)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rep.Counts, (batch.Counts{Applied: 2, Replayed: 3}); got != want {
		t.Fatalf("re-run: counts %+v, want %+v", got, want)
	}
}

// An item whose key stays in flight (held by another transaction) is tried
// again for Config.InFlightWait, then reported Failed with ErrInFlight.
func TestInFlightPastTheWaitFails(t *testing.T) {
	t.Parallel()
	l := setup(t)
	ctx := context.Background()
	rec, tx, err := l.store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: batch.Key("w", "row-0"), Now: time.Now()})
	if err != nil || rec != nil {
		t.Fatalf("Begin: %v, %v", rec, err)
	}
	defer tx.Rollback(ctx)
	rep, err := batch.Run(ctx, l.guard, &batch.Config{BatchID: "w", Scope: "s", InFlightWait: 100 * time.Millisecond}, items(2), l.apply)
	if err != nil {
		t.Fatal(err)
	}
	if ir := rep.Items[0]; ir.Outcome != batch.Failed || !errors.Is(ir.Err, idem.ErrInFlight) {
		t.Errorf("item held elsewhere: %+v, want Failed with ErrInFlight", ir)
	}
	if rep.Items[1].Outcome != batch.Applied {
		t.Errorf("the next item: %+v, want Applied", rep.Items[1])
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	t.Parallel()
	l := setup(t)
	ctx := context.Background()
	for name, c := range map[string]*batch.Config{
		"NilConfig":           nil,
		"NoBatchID":           {Scope: "s"},
		"NoScope":             {BatchID: "b"},
		"NegativeConcurrency": {BatchID: "b", Scope: "s", Concurrency: -1},
		"NegativeTTL":         {BatchID: "b", Scope: "s", TTL: -time.Second},
	} {
		if rep, err := batch.Run(ctx, l.guard, c, items(1), l.apply); err == nil || rep != nil {
			t.Errorf("%s: %v, %v; want an error and no report", name, rep, err)
		}
	}
	if _, err := batch.Run(ctx, l.guard, cfg("b"), []batch.Item[int]{{ID: "a"}, {}}, l.apply); err == nil {
		t.Error("an item without an ID: want an error")
	}
	if l.ran.Load() != 0 {
		t.Error("the work ran for a refused batch")
	}
	if rep, err := batch.Run(ctx, l.guard, cfg("b"), nil, l.apply); err != nil || len(rep.Items) != 0 || !rep.OK() {
		t.Errorf("an empty batch: %+v, %v; want an empty report", rep, err)
	}
}

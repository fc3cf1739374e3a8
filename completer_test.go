package idem_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/memstore"
)

// syncBuffer is a log sink safe for the completer's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type completerSetup struct {
	clock *testclock.Clock
	l     *idem.Leased
	s     *memstore.Store
	c     *idem.Completer
	log   *syncBuffer
	mu    sync.Mutex
	evs   []idem.CompleterEvent
}

func setupCompleter(t *testing.T) *completerSetup {
	t.Helper()
	cs := &completerSetup{clock: testclock.New(), log: &syncBuffer{}}
	cs.s = memstore.New()
	var err error
	cs.l, err = idem.NewLeased(cs.s, &idem.LeasedConfig{Lease: 30 * time.Second, Now: cs.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	cs.c, err = idem.NewCompleter(cs.l, &idem.CompleterConfig{
		MinBackoff: time.Second, MaxBackoff: time.Minute, ReportAfter: 10 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(cs.log, nil)),
		Observe: func(e idem.CompleterEvent) {
			cs.mu.Lock()
			defer cs.mu.Unlock()
			cs.evs = append(cs.evs, e)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (cs *completerSetup) pass(t *testing.T) idem.CompleterReport {
	t.Helper()
	rep, err := cs.c.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// An abandoned record of a registered kind is finished from its last
// recovery point, and the client's retry gets the completer's answer (L5).
func TestCompleterFinishesAbandonedWork(t *testing.T) {
	t.Parallel()
	cs := setupCompleter(t)
	var debits atomic.Int32
	providerUp := false
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		if _, err := run.Step(ctx, "debit", func(context.Context) ([]byte, error) {
			debits.Add(1)
			return nil, nil
		}); err != nil {
			return idem.Result{}, err
		}
		if !providerUp {
			return idem.Result{}, errors.New("provider: unknown outcome")
		}
		return idem.Result{Status: 201, Body: append([]byte("input="), run.Input...)}, nil
	}
	if err := cs.l.Register("payout", work); err != nil {
		t.Fatal(err)
	}
	req := leasedReq("k")
	req.Kind, req.Input = "payout", []byte("acct-1")
	if _, _, err := cs.l.Do(context.Background(), req, work); err == nil {
		t.Fatal("first attempt did not fail")
	}
	providerUp = true
	rep := cs.pass(t)
	if rep.Found != 1 || rep.Completed != 1 {
		t.Fatalf("pass = %+v, want 1 found and completed", rep)
	}
	res, replayed, err := cs.l.Do(context.Background(), req, work)
	if err != nil || !replayed || string(res.Body) != "input=acct-1" {
		t.Fatalf("client retry after the completer: %q replayed %v err %v", res.Body, replayed, err)
	}
	if debits.Load() != 1 {
		t.Fatalf("debit ran %d times, want 1", debits.Load())
	}
	if rep := cs.pass(t); rep.Found != 0 {
		t.Fatalf("second pass found %d records, want none", rep.Found)
	}
}

// A failing record is retried with a growing backoff, and past ReportAfter
// it is reported for a human and kept pending, never dropped.
func TestCompleterBacksOffAndReportsStuckWork(t *testing.T) {
	t.Parallel()
	cs := setupCompleter(t)
	var attempts atomic.Int32
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		attempts.Add(1)
		return idem.Result{}, errors.New("provider: unknown outcome")
	}
	if err := cs.l.Register("payout", work); err != nil {
		t.Fatal(err)
	}
	req := leasedReq("k")
	req.Kind = "payout"
	_, _, _ = cs.l.Do(context.Background(), req, work)
	if rep := cs.pass(t); rep.Failed != 1 || rep.Stuck != 0 {
		t.Fatalf("first pass = %+v, want one failure, not stuck", rep)
	}
	// Attempt 2 failed: the next is due after MinBackoff·2 = 2 s.
	cs.clock.Advance(1500 * time.Millisecond)
	if rep := cs.pass(t); rep.Found != 0 {
		t.Fatalf("pass inside the backoff found %d records, want 0", rep.Found)
	}
	cs.clock.Advance(time.Second)
	if rep := cs.pass(t); rep.Failed != 1 {
		t.Fatalf("pass after the backoff = %+v, want one failure", rep)
	}
	cs.clock.Advance(11 * time.Minute)
	rep := cs.pass(t)
	if rep.Failed != 1 || rep.Stuck != 1 {
		t.Fatalf("pass past ReportAfter = %+v, want one stuck failure", rep)
	}
	if !strings.Contains(cs.log.String(), "needs a human") || !strings.Contains(cs.log.String(), "level=ERROR") {
		t.Fatalf("no ERROR line for the stuck record in the log:\n%s", cs.log)
	}
	if rec := lookup(t, cs.s, "k"); rec.State != idem.StatePending || rec.Attempts != 4 {
		t.Fatalf("stuck record: %s after %d attempts, want pending after 4", rec.State, rec.Attempts)
	}
	if attempts.Load() != 4 {
		t.Fatalf("work ran %d times, want 4", attempts.Load())
	}
}

func TestCompleterLeavesUnknownKindsAndLiveLeases(t *testing.T) {
	t.Parallel()
	cs := setupCompleter(t)
	fail := func(context.Context, *idem.Run) (idem.Result, error) { return idem.Result{}, errors.New("x") }
	req := leasedReq("unknown")
	req.Kind = "not-registered"
	_, _, _ = cs.l.Do(context.Background(), req, fail)
	if rep := cs.pass(t); rep.UnknownKind != 1 {
		t.Fatalf("pass = %+v, want one unknown kind", rep)
	}
	if rec := lookup(t, cs.s, "unknown"); rec.State != idem.StatePending || !rec.LeaseUntil.After(cs.clock.Now().Add(59*time.Second)) {
		t.Fatalf("unknown kind: %s until %s, want pending and put off for MaxBackoff", rec.State, rec.LeaseUntil)
	}

	hold, started := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = cs.l.Do(context.Background(), leasedReq("live"), func(context.Context, *idem.Run) (idem.Result, error) {
			close(started)
			<-hold
			return idem.Result{Status: 200}, nil
		})
	}()
	<-started
	if rep := cs.pass(t); rep.Found != 0 {
		t.Fatalf("a pass took %d records under a live lease", rep.Found)
	}
	close(hold)
	<-done
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.evs) != 1 || cs.evs[0].Outcome != idem.CompleterUnknownKind {
		t.Fatalf("observed %+v, want one unknown-kind event", cs.evs)
	}
}

func TestCompleterConfigErrors(t *testing.T) {
	t.Parallel()
	l, _ := setupLeased(t, nil)
	for name, cfg := range map[string]*idem.CompleterConfig{
		"NegativeInterval": {Interval: -1},
		"NegativeLimit":    {Limit: -1},
		"BackoffsInverted": {MinBackoff: time.Minute, MaxBackoff: time.Second},
	} {
		if _, err := idem.NewCompleter(l, cfg); err == nil {
			t.Errorf("%s: NewCompleter accepted %+v", name, cfg)
		}
	}
	if _, err := idem.NewCompleter(nil, nil); err == nil {
		t.Error("NewCompleter accepted a nil Leased")
	}
}

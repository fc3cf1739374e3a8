package idem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/memstore"
)

func setupLeased(t *testing.T, cfg *idem.LeasedConfig) (*idem.Leased, *memstore.Store) {
	t.Helper()
	s := memstore.New()
	l, err := idem.NewLeased(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, s
}

func leasedReq(key string) idem.LeasedRequest {
	return idem.LeasedRequest{Scope: "tenant-a", Key: key, Fingerprint: "fp"}
}

func lookup(t *testing.T, s *memstore.Store, key string) *idem.Record {
	t.Helper()
	rec, err := s.Lookup(context.Background(), &idem.LookupParams{Scope: "tenant-a", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestLeasedReplaysTheResult(t *testing.T) {
	t.Parallel()
	l, _ := setupLeased(t, nil)
	ctx := context.Background()
	var runs atomic.Int32
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		runs.Add(1)
		return idem.Result{Status: 201, Header: map[string][]string{"X-A": {"1"}}, Body: []byte("done")}, nil
	}
	first, replayed, err := l.Do(ctx, leasedReq("k"), work)
	if err != nil || replayed {
		t.Fatalf("first Do: replayed %v, err %v", replayed, err)
	}
	again, replayed, err := l.Do(ctx, leasedReq("k"), work)
	if err != nil || !replayed {
		t.Fatalf("second Do: replayed %v, err %v; want a replay", replayed, err)
	}
	if string(again.Body) != string(first.Body) || again.Status != 201 || again.Header["X-A"][0] != "1" {
		t.Fatalf("replay = %+v, want %+v", again, first)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("work ran %d times, want 1", n)
	}
	if _, _, err := l.Do(ctx, idem.LeasedRequest{Scope: "tenant-a", Key: "k", Fingerprint: "other"}, work); !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("another fingerprint: err %v, want ErrMismatch", err)
	}
}

func TestLeasedLiveLeaseIsInFlight(t *testing.T) {
	t.Parallel()
	l, _ := setupLeased(t, &idem.LeasedConfig{Lease: 30 * time.Second})
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := l.Do(ctx, leasedReq("k"), func(context.Context, *idem.Run) (idem.Result, error) {
			close(started)
			<-release
			return idem.Result{Status: 200}, nil
		})
		done <- err
	}()
	<-started
	_, _, err := l.Do(ctx, leasedReq("k"), func(context.Context, *idem.Run) (idem.Result, error) {
		t.Error("a second work ran during a live lease")
		return idem.Result{}, nil
	})
	var ife *idem.InFlightError
	if !errors.As(err, &ife) {
		t.Fatalf("during a live lease: err %v, want an InFlightError", err)
	}
	if ife.RetryAfter < 29*time.Second || ife.RetryAfter > 30*time.Second {
		t.Fatalf("RetryAfter = %s, want what is left of the 30 s lease", ife.RetryAfter)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLeasedResumesAfterTheLastStep(t *testing.T) {
	t.Parallel()
	l, s := setupLeased(t, nil)
	ctx := context.Background()
	var debits, charges atomic.Int32
	fail := true
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		out, err := run.Step(ctx, "debit", func(context.Context) ([]byte, error) {
			debits.Add(1)
			return []byte("payout-7"), nil
		})
		if err != nil {
			return idem.Result{}, err
		}
		if _, err := run.Step(ctx, "charge", func(context.Context) ([]byte, error) {
			charges.Add(1)
			if fail {
				return nil, errors.New("provider: outcome unknown")
			}
			return []byte("ch_1"), nil
		}); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 201, Body: append(out, fmtAttempt(run)...)}, nil
	}
	if _, _, err := l.Do(ctx, leasedReq("k"), work); err == nil || err.Error() != "provider: outcome unknown" {
		t.Fatalf("first Do: err %v, want the work's own error", err)
	}
	rec := lookup(t, s, "k")
	if rec.State != idem.StatePending || rec.LastError != "provider: outcome unknown" {
		t.Fatalf("after a failed attempt: state %s, last error %q; want pending with the error", rec.State, rec.LastError)
	}
	fail = false
	res, replayed, err := l.Do(ctx, leasedReq("k"), work)
	if err != nil || replayed {
		t.Fatalf("retry: replayed %v, err %v", replayed, err)
	}
	if got := string(res.Body); got != "payout-7 attempt 2" {
		t.Fatalf("retry answered %q, want the first step's output on attempt 2", got)
	}
	if debits.Load() != 1 || charges.Load() != 2 {
		t.Fatalf("debit ran %d times and charge %d; want 1 and 2 (the failed step is retried, the saved one is not)", debits.Load(), charges.Load())
	}
}

func fmtAttempt(run *idem.Run) []byte {
	return []byte(" attempt " + string(rune('0'+run.Attempt)))
}

// A holder whose lease was taken over writes nothing, however late it
// wakes up (L2).
func TestLeasedStaleHolderIsFenced(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	l, s := setupLeased(t, &idem.LeasedConfig{Lease: 30 * time.Second, Now: clock.Now})
	ctx := context.Background()
	started, wake := make(chan struct{}), make(chan struct{})
	stale := make(chan error, 1)
	go func() {
		_, _, err := l.Do(ctx, leasedReq("k"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
			close(started)
			<-wake
			if _, err := run.Step(ctx, "late", func(context.Context) ([]byte, error) { return []byte("x"), nil }); err != nil {
				return idem.Result{}, err
			}
			return idem.Result{Status: 201, Body: []byte("stale")}, nil
		})
		stale <- err
	}()
	<-started
	clock.Advance(31 * time.Second)
	res, _, err := l.Do(ctx, leasedReq("k"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		if run.Attempt != 2 {
			t.Errorf("takeover attempt = %d, want 2", run.Attempt)
		}
		return idem.Result{Status: 201, Body: []byte("successor")}, nil
	})
	if err != nil || string(res.Body) != "successor" {
		t.Fatalf("takeover: %q, %v", res.Body, err)
	}
	close(wake)
	if err := <-stale; !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("stale holder: err %v, want ErrFenced", err)
	}
	if rec := lookup(t, s, "k"); string(rec.Result.Body) != "successor" || rec.State != idem.StateCompleted {
		t.Fatalf("record after the stale holder woke: %s %q, want the successor's result", rec.State, rec.Result.Body)
	}
}

// flakyHeartbeats is a leased store whose heartbeats fail with err.
type flakyHeartbeats struct {
	*memstore.Store
	err error
}

func (f flakyHeartbeats) Heartbeat(context.Context, *idem.HeartbeatParams) error { return f.err }

func TestLeasedLostLeaseCancelsTheWork(t *testing.T) {
	t.Parallel()
	for name, hbErr := range map[string]error{
		"Refused":        idem.ErrFenced,
		"RunsOutFailing": errors.New("connection refused"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := flakyHeartbeats{memstore.New(), hbErr}
			l, err := idem.NewLeased(s, &idem.LeasedConfig{Lease: 300 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var cause error
			_, _, err = l.Do(context.Background(), leasedReq("k"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
				select {
				case <-ctx.Done():
					cause = context.Cause(ctx)
					return idem.Result{}, ctx.Err()
				case <-time.After(20 * time.Second):
					return idem.Result{Status: 200}, nil
				}
			})
			if !errors.Is(err, idem.ErrFenced) || !errors.Is(cause, idem.ErrFenced) {
				t.Fatalf("Do: %v (work's cause %v); want both to match ErrFenced", err, cause)
			}
			if rec := lookup(t, s.Store, "k"); rec.State != idem.StatePending {
				t.Fatalf("a lost lease completed the record (%s)", rec.State)
			}
		})
	}
}

func TestLeasedHeartbeatKeepsTheLease(t *testing.T) {
	t.Parallel()
	l, _ := setupLeased(t, &idem.LeasedConfig{Lease: 400 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	ctx := context.Background()
	held := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := l.Do(ctx, leasedReq("k"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
			<-held
			return idem.Result{Status: 200}, ctx.Err()
		})
		done <- err
	}()
	// Well past the first lease, the work still holds the key.
	time.Sleep(1200 * time.Millisecond)
	_, _, err := l.Do(ctx, leasedReq("k"), func(context.Context, *idem.Run) (idem.Result, error) {
		t.Error("a second work ran while the first one's heartbeat was alive")
		return idem.Result{}, nil
	})
	if !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("during a heartbeat-extended lease: err %v, want ErrInFlight", err)
	}
	close(held)
	if err := <-done; err != nil {
		t.Fatalf("holder: %v", err)
	}
}

func TestLeasedPanicReleasesTheKey(t *testing.T) {
	t.Parallel()
	l, s := setupLeased(t, nil)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the work's panic", p)
			}
		}()
		_, _, _ = l.Do(context.Background(), leasedReq("k"), func(context.Context, *idem.Run) (idem.Result, error) { panic("boom") })
	}()
	if rec := lookup(t, s, "k"); rec.State != idem.StatePending || rec.LastError != "panic: boom" {
		t.Fatalf("after a panic: %s, %q; want pending and released", rec.State, rec.LastError)
	}
	if _, _, err := l.Do(context.Background(), leasedReq("k"), func(context.Context, *idem.Run) (idem.Result, error) {
		return idem.Result{Status: 200}, nil
	}); err != nil {
		t.Fatalf("retry after a panic: %v", err)
	}
}

func TestLeasedLocalStep(t *testing.T) {
	t.Parallel()
	l, s := setupLeased(t, nil)
	ctx := context.Background()
	var runs atomic.Int32
	fail := true
	work := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
		if _, err := run.LocalStep(ctx, "debit", func(ctx context.Context) ([]byte, error) {
			runs.Add(1)
			tx, ok := memstore.TxFrom(ctx)
			if !ok {
				return nil, errors.New("no memstore transaction in a local step")
			}
			tx.Set("balance", "90")
			if fail {
				return nil, errors.New("constraint")
			}
			return []byte("ok"), nil
		}); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 201}, nil
	}
	if _, _, err := l.Do(ctx, leasedReq("k"), work); err == nil {
		t.Fatal("a failing local step did not fail the work")
	}
	if v, ok := s.Value("balance"); ok {
		t.Fatalf("a failed local step's write was committed: %q", v)
	}
	fail = false
	if _, _, err := l.Do(ctx, leasedReq("k"), work); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Value("balance"); v != "90" {
		t.Fatalf("balance = %q after the local step, want 90", v)
	}
	if _, replayed, _ := l.Do(ctx, leasedReq("k"), work); !replayed || runs.Load() != 2 {
		t.Fatalf("replayed %v, local step ran %d times; want a replay and 2 runs", replayed, runs.Load())
	}
}

func TestLeasedConcurrentRequestsRunOnce(t *testing.T) {
	t.Parallel()
	l, _ := setupLeased(t, nil)
	var runs atomic.Int32
	var inFlight, replays atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, replayed, err := l.Do(context.Background(), leasedReq("k"), func(context.Context, *idem.Run) (idem.Result, error) {
				runs.Add(1)
				time.Sleep(50 * time.Millisecond)
				return idem.Result{Status: 201}, nil
			})
			switch {
			case errors.Is(err, idem.ErrInFlight):
				inFlight.Add(1)
			case err != nil:
				t.Error(err)
			case replayed:
				replays.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if runs.Load() != 1 || inFlight.Load()+replays.Load() != 49 {
		t.Fatalf("work ran %d times, %d in flight, %d replays; want 1 run and 49 others", runs.Load(), inFlight.Load(), replays.Load())
	}
}

func TestGuardAnswersAPendingClaimInFlight(t *testing.T) {
	t.Parallel()
	l, s := setupLeased(t, nil)
	g := setup(t, s)
	hold := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_, _, _ = l.Do(context.Background(), leasedReq("k"), func(context.Context, *idem.Run) (idem.Result, error) {
			close(started)
			<-hold
			return idem.Result{Status: 200}, nil
		})
	}()
	<-started
	defer close(hold)
	_, _, err := g.Do(context.Background(), idem.Request{Scope: "tenant-a", Key: "k", Fingerprint: "fp"}, func(context.Context) (idem.Result, error) {
		t.Error("atomic work ran on a key with a pending leased claim")
		return idem.Result{}, nil
	})
	if !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("atomic Do on a pending claim: %v, want ErrInFlight", err)
	}
	n, err := s.DeleteExpired(context.Background(), &idem.DeleteExpiredParams{Now: time.Now().Add(100 * 365 * 24 * time.Hour), Limit: 10})
	if err != nil || n != 0 {
		t.Fatalf("the sweeper deleted %d pending records (%v), want 0", n, err)
	}
}

func TestDerivedKey(t *testing.T) {
	t.Parallel()
	// The derived key of a step must never change between versions: a
	// re-run after an upgrade would send a new key, and the provider would
	// charge again.
	if got, want := idem.DerivedKey("tenant-a", "order-1", "charge"), "idem_aicllst7sdba2ilbakujzfq4jechxrit"; got != want {
		t.Fatalf("DerivedKey = %s, want %s", got, want)
	}
	seen := map[string][3]string{}
	for _, c := range [][3]string{
		{"a", "bc", "d"}, {"ab", "c", "d"}, {"a", "b", "cd"}, {"", "abc", "d"},
		{"tenant-b", "order-1", "charge"}, {"tenant-a", "order-2", "charge"}, {"tenant-a", "order-1", "refund"},
	} {
		k := idem.DerivedKey(c[0], c[1], c[2])
		if prev, dup := seen[k]; dup {
			t.Fatalf("%q and %q share the derived key %s", prev, c, k)
		}
		if err := idem.ValidateKey(k); err != nil || len(k) != 37 {
			t.Fatalf("derived key %q (%d bytes) is not a valid key: %v", k, len(k), err)
		}
		seen[k] = c
	}
}

func TestLeasedConfigErrors(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	for name, cfg := range map[string]*idem.LeasedConfig{
		"NegativeLease":     {Lease: -1},
		"HeartbeatTooLong":  {Lease: time.Second, Heartbeat: time.Second},
		"NegativeHeartbeat": {Heartbeat: -1},
		"NegativeTTL":       {TTL: -time.Second},
	} {
		if _, err := idem.NewLeased(s, cfg); err == nil {
			t.Errorf("%s: NewLeased accepted %+v", name, cfg)
		}
	}
	if _, err := idem.NewLeased(nil, nil); err == nil {
		t.Error("NewLeased accepted a nil store")
	}
	l, _ := idem.NewLeased(s, nil)
	work := func(context.Context, *idem.Run) (idem.Result, error) { return idem.Result{}, nil }
	if err := l.Register("", work); err == nil {
		t.Error("Register accepted an empty kind")
	}
	if err := l.Register("k", work); err != nil {
		t.Fatal(err)
	}
	if err := l.Register("k", work); err == nil {
		t.Error("Register accepted a kind twice")
	}
	if _, _, err := l.Do(context.Background(), idem.LeasedRequest{Key: "bad key"}, work); !errors.Is(err, idem.ErrInvalidKey) {
		t.Errorf("Do with an invalid key: %v", err)
	}
	if _, _, err := l.Do(context.Background(), idem.LeasedRequest{Key: "k", Kind: "a\nb"}, work); err == nil {
		t.Error("Do accepted a kind with a control character")
	}
}

// A work that goes on after one of its steps was fenced, and fails in its
// own way, has still lost its lease: Do says so (and releases nothing).
func TestLeasedFencedStepIsALostLease(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	l, _ := setupLeased(t, &idem.LeasedConfig{Lease: 30 * time.Second, Now: clock.Now})
	ctx := context.Background()
	started, wake := make(chan struct{}), make(chan struct{})
	stale := make(chan error, 1)
	go func() {
		_, _, err := l.Do(ctx, leasedReq("k"), func(ctx context.Context, run *idem.Run) (idem.Result, error) {
			close(started)
			<-wake
			_, _ = run.Step(ctx, "late", func(context.Context) ([]byte, error) { return nil, nil })
			return idem.Result{}, errors.New("the handler answered 503")
		})
		stale <- err
	}()
	<-started
	clock.Advance(31 * time.Second)
	if _, _, err := l.Do(ctx, leasedReq("k"), func(context.Context, *idem.Run) (idem.Result, error) {
		return idem.Result{Status: 201}, nil
	}); err != nil {
		t.Fatal(err)
	}
	close(wake)
	if err := <-stale; !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("stale holder whose step was fenced: %v, want ErrFenced", err)
	}
}

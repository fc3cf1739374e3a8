package idem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// blockingWork runs until release is closed, after closing started.
func blockingWork(runs *atomic.Int64, started chan<- struct{}, release <-chan struct{}) idem.Work {
	return func(ctx context.Context) (idem.Result, error) {
		runs.Add(1)
		close(started)
		select {
		case <-release:
			return idem.Result{Status: 201, Body: []byte("done")}, nil
		case <-time.After(30 * time.Second):
			return idem.Result{}, errors.New("never released")
		}
	}
}

func TestLocalInFlightRefusesWithoutTheStore(t *testing.T) {
	t.Parallel()
	g, cs, _, _ := cacheSetup(t, nil)
	ctx := context.Background()
	var runs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	first := make(chan error, 1)
	go func() {
		_, _, err := g.Do(ctx, req, blockingWork(&runs, started, release))
		first <- err
	}()
	<-started

	const dups = 50
	var wg sync.WaitGroup
	var refused, other atomic.Int64
	var localInfo atomic.Int64
	for range dups {
		wg.Go(func() {
			var info idem.CallInfo
			_, _, err := g.Do(idem.WithCallInfo(ctx, &info), req, func(context.Context) (idem.Result, error) {
				runs.Add(1)
				return idem.Result{}, nil
			})
			var ife *idem.InFlightError
			if errors.As(err, &ife) && ife.RetryAfter == time.Second {
				refused.Add(1)
			} else {
				other.Add(1)
			}
			if info.LocalInFlight {
				localInfo.Add(1)
			}
		})
	}
	wg.Wait()
	if refused.Load() != dups || other.Load() != 0 || localInfo.Load() != dups {
		t.Errorf("refused=%d other=%d CallInfo.LocalInFlight=%d, want all %d refused in flight in process", refused.Load(), other.Load(), localInfo.Load(), dups)
	}
	if n := cs.begins.Load(); n != 1 {
		t.Errorf("store Begin calls = %d, want 1: the duplicates never reached the store", n)
	}
	if n := g.Stats().LocalInFlight; n != dups {
		t.Errorf("Stats.LocalInFlight = %d, want %d", n, dups)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := g.Do(ctx, req, blockingWork(&runs, make(chan struct{}), nil)); err != nil || !replayed {
		t.Errorf("after completion: replayed=%v err=%v, want a replay", replayed, err)
	}
	if runs.Load() != 1 {
		t.Errorf("works ran %d times, want 1", runs.Load())
	}
}

func TestLocalInFlightIsPerScopeAndKey(t *testing.T) {
	t.Parallel()
	g, cs, _, _ := cacheSetup(t, nil)
	ctx := context.Background()
	var runs atomic.Int64
	release := make(chan struct{})
	reqs := []idem.Request{
		{Scope: "a", Key: "k", Fingerprint: "fp"},
		{Scope: "b", Key: "k", Fingerprint: "fp"},
		{Scope: "a", Key: "k2", Fingerprint: "fp"},
	}
	var wg sync.WaitGroup
	errs := make([]error, len(reqs))
	for i, req := range reqs {
		started := make(chan struct{})
		wg.Go(func() {
			_, _, errs[i] = g.Do(ctx, req, blockingWork(&runs, started, release))
		})
		<-started // each runs while the others are running
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%+v: %v", reqs[i], err)
		}
	}
	if runs.Load() != 3 || cs.begins.Load() != 3 {
		t.Errorf("runs=%d begins=%d, want 3 and 3", runs.Load(), cs.begins.Load())
	}
}

func TestLocalInFlightReleasedAfterFailureAndPanic(t *testing.T) {
	t.Parallel()
	g, _, _, _ := cacheSetup(t, nil)
	ctx := context.Background()
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	boom := errors.New("boom")
	if _, _, err := g.Do(ctx, req, func(context.Context) (idem.Result, error) { return idem.Result{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on")
			}
		}()
		_, _, _ = g.Do(ctx, req, func(context.Context) (idem.Result, error) { panic("work panics") })
	}()
	var runs atomic.Int64
	if _, replayed, err := g.Do(ctx, req, bodyWork(&runs, "ok")); err != nil || replayed || runs.Load() != 1 {
		t.Errorf("after a failure and a panic: replayed=%v err=%v runs=%d, want a first execution", replayed, err, runs.Load())
	}
}

func TestLocalInFlightOptOutLeavesItToTheStore(t *testing.T) {
	t.Parallel()
	g, cs, _, _ := cacheSetup(t, &idem.Config{DisableLocalInFlight: true})
	ctx := context.Background()
	var runs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	done := make(chan error, 1)
	go func() {
		_, _, err := g.Do(ctx, req, blockingWork(&runs, started, release))
		done <- err
	}()
	<-started
	var info idem.CallInfo
	_, _, err := g.Do(idem.WithCallInfo(ctx, &info), req, bodyWork(&runs, "dup"))
	if !errors.Is(err, idem.ErrInFlight) || info.LocalInFlight {
		t.Errorf("duplicate: err=%v local=%v, want ErrInFlight from the store", err, info.LocalInFlight)
	}
	if cs.begins.Load() != 2 || g.Stats().LocalInFlight != 0 {
		t.Errorf("begins=%d local=%d, want the duplicate at the store (2) and no local refusal", cs.begins.Load(), g.Stats().LocalInFlight)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

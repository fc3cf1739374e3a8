package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// refusedLocally returns once g has refused n calls in flight in process.
func refusedLocally(t *testing.T, g *idem.Guard, n uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for g.Stats().LocalInFlight < n {
		if time.Now().After(deadline) {
			t.Fatal("the waiter was never refused in process")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWaitInProcess: a duplicate of a key this Guard runs, with
// Config.Wait, is woken by the end of the run and replays its answer; one
// past its bound, or with a Wait of -1, is refused; one after a failed run
// runs itself, never during it. The store-level cases are in storetest.
func TestWaitInProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	var running atomic.Int64
	var overlap atomic.Bool
	var started chan struct{}
	holder := func(release <-chan struct{}, end error) idem.Work {
		started = make(chan struct{})
		return func(context.Context) (idem.Result, error) {
			close(started)
			if running.Add(1) > 1 {
				overlap.Store(true)
			}
			defer running.Add(-1)
			<-release
			return idem.Result{Status: 201, Body: []byte("holder")}, end
		}
	}
	var waiterRuns atomic.Int64
	waiter := func(context.Context) (idem.Result, error) {
		waiterRuns.Add(1)
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		defer running.Add(-1)
		return idem.Result{Status: 201, Body: []byte("waiter")}, nil
	}
	run := func(g *idem.Guard, r idem.Request, w idem.Work) <-chan error {
		out := make(chan error, 1)
		go func() {
			_, _, err := g.Do(ctx, r, w)
			out <- err
		}()
		return out
	}

	t.Run("replay", func(t *testing.T) {
		g, cs, _, _ := cacheSetup(t, &idem.Config{Wait: time.Minute})
		release := make(chan struct{})
		held := run(g, req, holder(release, nil))
		<-started
		var got atomic.Value
		done := make(chan struct{})
		go func() {
			defer close(done)
			res, replayed, err := g.Do(ctx, req, waiter)
			got.Store([3]any{string(res.Body), replayed, err})
		}()
		refusedLocally(t, g, 1)
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		<-done
		if v := got.Load().([3]any); v[0] != "holder" || v[1] != true || v[2] != nil {
			t.Fatalf("waiter got %v, want a replay of \"holder\"", v)
		}
		if n := cs.begins.Load(); n != 1 {
			t.Fatalf("store Begins = %d, want 1: the waiter was answered from the replay cache", n)
		}
	})

	t.Run("bound", func(t *testing.T) {
		g, _, _, _ := cacheSetup(t, &idem.Config{Wait: time.Minute})
		release := make(chan struct{})
		held := run(g, req, holder(release, nil))
		<-started
		short := req
		short.Wait = 10 * time.Millisecond
		_, _, err := g.Do(ctx, short, waiter)
		if !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("past its bound: %v, want ErrInFlight", err)
		}
		off := req
		off.Wait = -1
		if _, _, err := g.Do(ctx, off, waiter); !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("Wait -1: %v, want ErrInFlight", err)
		}
		close(release)
		<-held
	})

	t.Run("failed holder", func(t *testing.T) {
		g, _, _, _ := cacheSetup(t, &idem.Config{Wait: time.Minute})
		release := make(chan struct{})
		failed := errors.New("failed")
		held := run(g, req, holder(release, failed))
		<-started
		before := waiterRuns.Load()
		out := make(chan error, 1)
		go func() {
			res, replayed, err := g.Do(ctx, req, waiter)
			if err == nil && (replayed || string(res.Body) != "waiter") {
				err = errors.New("not its own execution")
			}
			out <- err
		}()
		refusedLocally(t, g, 1)
		close(release)
		if err := <-held; !errors.Is(err, failed) {
			t.Fatalf("holder: %v", err)
		}
		if err := <-out; err != nil {
			t.Fatal(err)
		}
		if n := waiterRuns.Load() - before; n != 1 || overlap.Load() {
			t.Fatalf("waiter runs = %d, overlap = %v; want 1, false", n, overlap.Load())
		}
	})

	t.Run("cancel", func(t *testing.T) {
		g, _, _, _ := cacheSetup(t, &idem.Config{Wait: time.Hour})
		release := make(chan struct{})
		held := run(g, req, holder(release, nil))
		<-started
		cctx, cancel := context.WithCancel(ctx)
		out := make(chan error, 1)
		go func() {
			_, _, err := g.Do(cctx, req, waiter)
			out <- err
		}()
		refusedLocally(t, g, 1)
		cancel()
		if err := <-out; !errors.Is(err, idem.ErrInFlight) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v, want ErrInFlight and context.Canceled", err)
		}
		close(release)
		<-held
	})
}

func TestConfigWaitMustNotBeNegative(t *testing.T) {
	t.Parallel()
	if _, err := idem.New(memstore.New(), &idem.Config{Wait: -time.Second}); err == nil {
		t.Fatal("idem.New accepted a negative Config.Wait")
	}
}

package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/memstore"
)

// flakyStore fails Begin with ErrUnavailable while down is set, as a store
// whose primary just died does.
type flakyStore struct {
	*countingStore
	down atomic.Bool
}

func (s *flakyStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if s.down.Load() {
		return nil, nil, errors.Join(idem.ErrUnavailable, errors.New("connection reset by peer"))
	}
	return s.countingStore.Begin(ctx, p)
}

// flakySetup returns a Guard over a flakyStore over a counting memstore.
func flakySetup(t *testing.T) (*idem.Guard, *flakyStore, *memstore.Store, *testclock.Clock) {
	t.Helper()
	_, cs, ms, clock := cacheSetup(t, nil)
	fs := &flakyStore{countingStore: cs}
	g, err := idem.New(fs, &idem.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return g, fs, ms, clock
}

// A record lost from the store (the last commits of a primary that failed
// over to an asynchronous standby) is not replayed from memory once the
// store has failed a call: the retry reaches the store and runs the work
// again, as it would on a Guard without a cache.
func TestReplayCacheDroppedAfterAStoreFailure(t *testing.T) {
	t.Parallel()
	g, fs, ms, clock := flakySetup(t)
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	if _, _, err := g.Do(ctx, req, bodyWork(&runs, "one")); err != nil {
		t.Fatal(err)
	}
	// The commit is lost with the primary: the record is gone from the
	// store that answers from now on.
	if _, err := ms.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Now: clock.Now(), Audit: idem.AuditEntry{Action: idem.AuditForget, Reason: "lost"}}); err != nil {
		t.Fatal(err)
	}
	fs.down.Store(true)
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "other", Fingerprint: "fp"}, bodyWork(&runs, "x")); !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("during the failover: err = %v, want ErrUnavailable", err)
	}
	fs.down.Store(false)
	res, replayed, err := g.Do(ctx, req, bodyWork(&runs, "two"))
	if err != nil || replayed || string(res.Body) != "two" {
		t.Fatalf("after the failover: body=%q replayed=%v err=%v, want the work run again", res.Body, replayed, err)
	}
	if runs.Load() != 2 {
		t.Errorf("work ran %d times, want 2", runs.Load())
	}
	// The new record is cached again.
	if _, replayed, err := g.Do(ctx, req, bodyWork(&runs, "three")); err != nil || !replayed || runs.Load() != 2 {
		t.Errorf("then: replayed=%v err=%v runs=%d, want a replay", replayed, err, runs.Load())
	}
}

// A caller's own cancelled call tells nothing of the store, and keeps the
// cache.
func TestReplayCacheKeptAfterACancelledCall(t *testing.T) {
	t.Parallel()
	g, fs, _, _ := flakySetup(t)
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	if _, _, err := g.Do(ctx, req, bodyWork(&runs, "one")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	fs.down.Store(true)
	if _, _, err := g.Do(cctx, idem.Request{Scope: "s", Key: "other", Fingerprint: "fp"}, bodyWork(&runs, "x")); err == nil {
		t.Fatal("a call on a failing store succeeded")
	}
	if _, replayed, err := g.Do(ctx, req, bodyWork(&runs, "two")); err != nil || !replayed {
		t.Errorf("replayed=%v err=%v, want a replay from memory (the store is down)", replayed, err)
	}
}

// Guard.Forget: the next call with the key runs again at once, although
// the record was in the cache.
func TestGuardForgetDropsTheCachedRecord(t *testing.T) {
	t.Parallel()
	_, _, ms, clock := cacheSetup(t, nil)
	g, err := idem.New(ms, &idem.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	if _, _, err := g.Do(ctx, req, bodyWork(&runs, "one")); err != nil {
		t.Fatal(err)
	}
	var info idem.CallInfo
	if _, replayed, _ := g.Do(idem.WithCallInfo(ctx, &info), req, bodyWork(&runs, "x")); !replayed || info.ReplayCache != idem.CacheHit {
		t.Fatal("the retry before Forget was not replayed from memory")
	}
	plain, err := idem.New(discardStore{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k"}); err == nil {
		t.Error("Forget on a store without Admin succeeded")
	}
	if _, err := g.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Now: clock.Now(), Audit: idem.AuditEntry{Action: idem.AuditForget, Reason: "undone"}}); err != nil {
		t.Fatal(err)
	}
	res, replayed, err := g.Do(ctx, req, bodyWork(&runs, "two"))
	if err != nil || replayed || string(res.Body) != "two" || runs.Load() != 2 {
		t.Fatalf("after Forget: body=%q replayed=%v err=%v runs=%d, want the work run again", res.Body, replayed, err, runs.Load())
	}
}

// A record forgotten by another process is replayed from memory for at
// most ReplayCacheAge after the Guard last read or wrote it.
func TestReplayCacheAge(t *testing.T) {
	t.Parallel()
	g, cs, ms, clock := cacheSetup(t, &idem.Config{ReplayCacheAge: 10 * time.Second})
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	if _, _, err := g.Do(ctx, req, bodyWork(&runs, "one")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10*time.Second - time.Nanosecond)
	if _, replayed, err := g.Do(ctx, req, bodyWork(&runs, "x")); err != nil || !replayed || cs.begins.Load() != 1 {
		t.Fatalf("within the age: replayed=%v err=%v begins=%d, want a replay from memory", replayed, err, cs.begins.Load())
	}
	clock.Advance(time.Nanosecond)
	if _, replayed, err := g.Do(ctx, req, bodyWork(&runs, "x")); err != nil || !replayed || cs.begins.Load() != 2 {
		t.Fatalf("at the age: replayed=%v err=%v begins=%d, want a replay read from the store", replayed, err, cs.begins.Load())
	}
	// That read put it back for another age; another process forgets it.
	if _, err := ms.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Now: clock.Now(), Audit: idem.AuditEntry{Action: idem.AuditForget, Reason: "undone"}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	res, replayed, err := g.Do(ctx, req, bodyWork(&runs, "two"))
	if err != nil || replayed || string(res.Body) != "two" || runs.Load() != 2 {
		t.Fatalf("an age after the forget: body=%q replayed=%v err=%v runs=%d, want the work run again", res.Body, replayed, err, runs.Load())
	}
	if _, err := idem.New(cs, &idem.Config{ReplayCacheAge: -time.Second}); err == nil {
		t.Error("a negative ReplayCacheAge was accepted")
	}
}

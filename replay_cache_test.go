package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/memstore"
)

// countingStore counts the calls of Begin on the store it wraps.
type countingStore struct {
	idem.Store
	begins atomic.Int64
}

func (s *countingStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	s.begins.Add(1)
	return s.Store.Begin(ctx, p)
}

// cacheSetup returns a Guard over a counting memstore, with cfg (nil for
// defaults) and a test clock.
func cacheSetup(t *testing.T, cfg *idem.Config) (*idem.Guard, *countingStore, *memstore.Store, *testclock.Clock) {
	t.Helper()
	ms := memstore.New()
	cs := &countingStore{Store: ms}
	clock := testclock.New()
	c := idem.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.Now = clock.Now
	g, err := idem.New(cs, &c)
	if err != nil {
		t.Fatal(err)
	}
	return g, cs, ms, clock
}

// bodyWork answers 201 with body, counting its runs.
func bodyWork(runs *atomic.Int64, body string) idem.Work {
	return func(ctx context.Context) (idem.Result, error) {
		runs.Add(1)
		return idem.Result{Status: 201, Header: map[string][]string{"Location": {"/t/" + body}}, Body: []byte(body)}, nil
	}
}

func TestReplayCacheAnswersWithoutTheStore(t *testing.T) {
	t.Parallel()
	g, cs, _, _ := cacheSetup(t, nil)
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	first, replayed, err := g.Do(ctx, req, bodyWork(&runs, "one"))
	if err != nil || replayed {
		t.Fatalf("first: replayed=%v err=%v", replayed, err)
	}
	var info idem.CallInfo
	got, replayed, err := g.Do(idem.WithCallInfo(ctx, &info), req, bodyWork(&runs, "two"))
	if err != nil || !replayed {
		t.Fatalf("retry: replayed=%v err=%v", replayed, err)
	}
	if got.Status != first.Status || !bytes.Equal(got.Body, first.Body) || got.Header["Location"][0] != "/t/one" {
		t.Errorf("retry got %+v, want %+v", got, first)
	}
	if n := cs.begins.Load(); n != 1 {
		t.Errorf("store Begin calls = %d, want 1 (the retry answered from memory)", n)
	}
	if runs.Load() != 1 {
		t.Errorf("work ran %d times, want 1", runs.Load())
	}
	if info.ReplayCache != idem.CacheHit {
		t.Errorf("CallInfo.ReplayCache = %q, want %q", info.ReplayCache, idem.CacheHit)
	}
	st := g.Stats()
	if st.ReplayCacheHits != 1 || st.ReplayCacheMisses != 1 || st.ReplayCacheEntries != 1 || st.ReplayCacheBytes <= 0 {
		t.Errorf("Stats = %+v, want 1 hit, 1 miss, 1 entry", st)
	}
}

func TestReplayCacheMismatchIsStillRefused(t *testing.T) {
	t.Parallel()
	g, cs, _, _ := cacheSetup(t, nil)
	ctx := context.Background()
	var runs atomic.Int64
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: "fp1"}, bodyWork(&runs, "a")); err != nil {
		t.Fatal(err)
	}
	var info idem.CallInfo
	_, _, err := g.Do(idem.WithCallInfo(ctx, &info), idem.Request{Scope: "s", Key: "k", Fingerprint: "fp2"}, bodyWork(&runs, "b"))
	if !errors.Is(err, idem.ErrMismatch) {
		t.Fatalf("err = %v, want ErrMismatch", err)
	}
	if cs.begins.Load() != 1 || runs.Load() != 1 || info.ReplayCache != idem.CacheHit {
		t.Errorf("begins=%d runs=%d cache=%q, want 1, 1, hit", cs.begins.Load(), runs.Load(), info.ReplayCache)
	}
}

func TestReplayCacheNeverServesAtOrPastExpiry(t *testing.T) {
	t.Parallel()
	g, cs, _, clock := cacheSetup(t, &idem.Config{TTL: time.Hour})
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	if _, _, err := g.Do(ctx, req, bodyWork(&runs, "a")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour - time.Nanosecond)
	if _, replayed, err := g.Do(ctx, req, bodyWork(&runs, "b")); err != nil || !replayed || cs.begins.Load() != 1 {
		t.Fatalf("just before expiry: replayed=%v err=%v begins=%d, want a replay from memory", replayed, err, cs.begins.Load())
	}
	clock.Advance(time.Nanosecond) // now = ExpiresAt
	var info idem.CallInfo
	res, replayed, err := g.Do(idem.WithCallInfo(ctx, &info), req, bodyWork(&runs, "b"))
	if err != nil || replayed || string(res.Body) != "b" {
		t.Fatalf("at expiry: replayed=%v err=%v body=%q, want a new execution", replayed, err, res.Body)
	}
	if cs.begins.Load() != 2 || runs.Load() != 2 || info.ReplayCache != idem.CacheMiss {
		t.Errorf("begins=%d runs=%d cache=%q, want 2, 2, miss", cs.begins.Load(), runs.Load(), info.ReplayCache)
	}
	// The new record is the one cached now.
	res, replayed, err = g.Do(ctx, req, bodyWork(&runs, "c"))
	if err != nil || !replayed || string(res.Body) != "b" || cs.begins.Load() != 2 {
		t.Errorf("after re-execution: body=%q replayed=%v err=%v begins=%d, want b replayed from memory", res.Body, replayed, err, cs.begins.Load())
	}
}

func TestReplayCacheFilledOnAReplayRead(t *testing.T) {
	t.Parallel()
	// Another Guard (another process, say) executed the key: the first
	// retry here reads the store, the next ones do not.
	ms := memstore.New()
	other, err := idem.New(ms, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	if _, _, err := other.Do(ctx, req, bodyWork(&runs, "a")); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: ms}
	g, err := idem.New(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		res, replayed, err := g.Do(ctx, req, bodyWork(&runs, "b"))
		if err != nil || !replayed || string(res.Body) != "a" {
			t.Fatalf("retry %d: body=%q replayed=%v err=%v", i, res.Body, replayed, err)
		}
	}
	if cs.begins.Load() != 1 {
		t.Errorf("store Begin calls = %d, want 1", cs.begins.Load())
	}
}

func TestReplayCacheIsBoundedByBytes(t *testing.T) {
	t.Parallel()
	const limit = 8 << 10
	g, cs, _, _ := cacheSetup(t, &idem.Config{ReplayCacheBytes: limit})
	ctx := context.Background()
	var runs atomic.Int64
	body := string(bytes.Repeat([]byte("x"), 1000))
	const keys = 40 // about 40 KiB of records: most must be evicted
	for i := range keys {
		req := idem.Request{Scope: "s", Key: "k" + strconv.Itoa(i), Fingerprint: "fp"}
		if _, _, err := g.Do(ctx, req, bodyWork(&runs, body+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		if st := g.Stats(); st.ReplayCacheBytes > limit {
			t.Fatalf("after %d records the cache holds %d bytes, over its bound of %d", i+1, st.ReplayCacheBytes, limit)
		}
	}
	st := g.Stats()
	if st.ReplayCacheEntries == 0 || st.ReplayCacheEntries >= keys {
		t.Fatalf("cache holds %d entries, want some but not all of %d", st.ReplayCacheEntries, keys)
	}
	// The most recent key is served from memory, the oldest from the store.
	before := cs.begins.Load()
	last := idem.Request{Scope: "s", Key: "k" + strconv.Itoa(keys-1), Fingerprint: "fp"}
	if _, replayed, err := g.Do(ctx, last, bodyWork(&runs, "no")); err != nil || !replayed || cs.begins.Load() != before {
		t.Errorf("newest key: replayed=%v err=%v begins %d→%d, want a replay from memory", replayed, err, before, cs.begins.Load())
	}
	oldest := idem.Request{Scope: "s", Key: "k0", Fingerprint: "fp"}
	res, replayed, err := g.Do(ctx, oldest, bodyWork(&runs, "no"))
	if err != nil || !replayed || string(res.Body) != body+"0" || cs.begins.Load() != before+1 {
		t.Errorf("evicted key: replayed=%v err=%v begins %d→%d, want a replay from the store", replayed, err, before, cs.begins.Load())
	}
	// A record larger than the whole cache is not kept.
	huge := idem.Request{Scope: "s", Key: "huge", Fingerprint: "fp"}
	if _, _, err := g.Do(ctx, huge, bodyWork(&runs, string(bytes.Repeat([]byte("y"), 2*limit)))); err != nil {
		t.Fatal(err)
	}
	if st := g.Stats(); st.ReplayCacheBytes > limit {
		t.Errorf("cache holds %d bytes after a huge record, over its bound %d", st.ReplayCacheBytes, limit)
	}
	before = cs.begins.Load()
	if _, replayed, err := g.Do(ctx, huge, bodyWork(&runs, "no")); err != nil || !replayed || cs.begins.Load() != before+1 {
		t.Errorf("huge record: replayed=%v err=%v, begins %d→%d, want a replay from the store", replayed, err, before, cs.begins.Load())
	}
}

func TestReplayCacheOptOut(t *testing.T) {
	t.Parallel()
	g, cs, _, _ := cacheSetup(t, &idem.Config{ReplayCacheBytes: -1})
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	var info idem.CallInfo
	for range 3 {
		info = idem.CallInfo{}
		if _, _, err := g.Do(idem.WithCallInfo(ctx, &info), req, bodyWork(&runs, "a")); err != nil {
			t.Fatal(err)
		}
	}
	if cs.begins.Load() != 3 || runs.Load() != 1 {
		t.Errorf("begins=%d runs=%d, want every call at the store (3) and one run", cs.begins.Load(), runs.Load())
	}
	if info.ReplayCache != idem.CacheUnused {
		t.Errorf("CallInfo.ReplayCache = %q with the cache off, want empty", info.ReplayCache)
	}
	if st := g.Stats(); st != (idem.GuardStats{}) {
		t.Errorf("Stats = %+v, want zeros", st)
	}
}

func TestReplayCacheReturnsCopies(t *testing.T) {
	t.Parallel()
	g, _, _, _ := cacheSetup(t, nil)
	ctx := context.Background()
	var runs atomic.Int64
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	first, _, err := g.Do(ctx, req, bodyWork(&runs, "abc"))
	if err != nil {
		t.Fatal(err)
	}
	first.Body[0] = 'X'
	first.Header["Location"][0] = "changed"
	for range 2 {
		got, _, err := g.Do(ctx, req, bodyWork(&runs, "no"))
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Body) != "abc" || got.Header["Location"][0] != "/t/abc" {
			t.Fatalf("replay = %q %v, want the recorded abc, /t/abc", got.Body, got.Header)
		}
		got.Body[0] = 'Y'
		got.Header["Location"] = nil
	}
}

// pendingStore answers every Begin with a pending record: a leased claim.
type pendingStore struct{ begins atomic.Int64 }

func (s *pendingStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	s.begins.Add(1)
	return &idem.Record{Scope: p.Scope, Key: p.Key, Fingerprint: "fp", State: idem.StatePending, ExpiresAt: idem.PendingExpiresAt}, nil, nil
}

func TestReplayCacheKeepsOnlyCompletedRecords(t *testing.T) {
	t.Parallel()
	s := &pendingStore{}
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	for range 2 {
		_, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, bodyWork(&runs, "a"))
		if !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("err = %v, want ErrInFlight", err)
		}
	}
	if s.begins.Load() != 2 || g.Stats().ReplayCacheEntries != 0 {
		t.Errorf("begins=%d entries=%d, want 2 and 0: a pending record is not cached", s.begins.Load(), g.Stats().ReplayCacheEntries)
	}
}

func TestReplayCacheUnderConcurrency(t *testing.T) {
	t.Parallel()
	// Many goroutines execute and replay many keys through a cache small
	// enough to evict all the time: every answer is its own key's.
	g, _, _, _ := cacheSetup(t, &idem.Config{ReplayCacheBytes: 4 << 10})
	ctx := context.Background()
	var runs atomic.Int64
	const workers, keys, rounds = 16, 64, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds * keys / workers {
				k := strconv.Itoa((w*7 + i) % keys)
				res, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k" + k, Fingerprint: "fp"}, bodyWork(&runs, "body-"+k))
				if errors.Is(err, idem.ErrInFlight) {
					continue
				}
				if err != nil || string(res.Body) != "body-"+k {
					errs <- fmt.Errorf("key %s: body %q err %v", k, res.Body, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if runs.Load() != keys {
		t.Errorf("works ran %d times, want once per key (%d)", runs.Load(), keys)
	}
	if st := g.Stats(); st.ReplayCacheBytes > 4<<10 || st.ReplayCacheHits == 0 {
		t.Errorf("Stats = %+v: want hits, and at most 4 KiB held", st)
	}
}

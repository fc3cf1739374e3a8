package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
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
	g, cs, _, clock := cacheSetup(t, &idem.Config{TTL: time.Hour, ReplayCacheAge: 2 * time.Hour})
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

// discardStore keeps nothing: every Begin finds no record and every Commit
// succeeds, so that after a call only the Guard's cache holds its record.
type discardStore struct{}

func (discardStore) Begin(context.Context, *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	return nil, discardTx{}, nil
}

type discardTx struct{}

func (discardTx) Handle() any                                      { return nil }
func (discardTx) Commit(context.Context, *idem.CommitParams) error { return nil }
func (discardTx) Rollback(context.Context) error                   { return nil }

// heapAlloc is the live heap after a full collection.
func heapAlloc() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// randomString returns n bytes of printable ASCII.
func randomString(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('!' + r.IntN(94))
	}
	return string(b)
}

// filler returns n bytes, of no interest but their number.
func filler(n int) []byte { return bytes.Repeat([]byte{'b'}, n) }

// randomResult returns a result of a random shape: no body, an empty or
// small one, now and then one of 1 to 40 KiB (a large object, over 32
// KiB, now and then); no header, an empty one, or up to 6 names of 1 to 3
// values, one of them now and then with none.
func randomResult(r *rand.Rand, i int) idem.Result {
	res := idem.Result{Status: 200 + r.IntN(300)}
	switch p := r.IntN(20); {
	case p == 0:
	case p == 1:
		res.Body = []byte{}
	case p < 4:
		res.Body = filler(1<<10 + r.IntN(40<<10))
	default:
		res.Body = filler(1 + r.IntN(600))
	}
	switch p := r.IntN(10); {
	case p == 0:
	case p == 1:
		res.Header = map[string][]string{}
	default:
		res.Header = map[string][]string{}
		for j := range 1 + r.IntN(6) {
			values := make([]string, r.IntN(4))
			for v := range values {
				values[v] = randomString(r, 1+r.IntN(80))
			}
			res.Header["X-H"+strconv.Itoa(j)+"-"+randomString(r, r.IntN(20))] = values
		}
	}
	return res
}

// The cache's own count of its bytes (GuardStats.ReplayCacheBytes, what
// Config.ReplayCacheBytes bounds) is at least what it adds to the heap,
// measured after a full collection, for entries of every shape: tiny
// records (where the per-entry structures are all there is), records of
// varied keys, scopes, headers and bodies up to large objects, and a
// bounded cache whose map held many more entries than it holds now. The
// count may be over by up to 30% (it counts the map at its emptiest load)
// and under by at most 1% plus 64 KiB of noise.
//
// Not parallel: it measures the whole heap.
func TestReplayCacheCountsWhatItHolds(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		limit int64
		fill  func(r *rand.Rand, i int) (idem.Request, idem.Result)
		n     int
	}{
		{"TinyRecords", 1 << 40, func(r *rand.Rand, i int) (idem.Request, idem.Result) {
			return idem.Request{Scope: "s", Key: "k" + strconv.Itoa(i), Fingerprint: "f"}, idem.Result{Status: 201}
		}, 100_000},
		{"VariedRecords", 1 << 40, func(r *rand.Rand, i int) (idem.Request, idem.Result) {
			req := idem.Request{
				Scope:       "tenant-" + strconv.Itoa(r.IntN(50)) + randomString(r, r.IntN(30)),
				Key:         strconv.Itoa(i) + "-" + randomString(r, r.IntN(200)),
				Fingerprint: randomString(r, 64),
			}
			return req, randomResult(r, i)
		}, 10_000},
		// The map keeps the size it grew to: after 80,000 tiny records,
		// 25,000 of a few hundred bytes, then 5,000 of a few KiB.
		{"BoundedAfterManyTinyRecords", 12 << 20, func(r *rand.Rand, i int) (idem.Request, idem.Result) {
			req := idem.Request{Scope: "s", Key: "k" + strconv.Itoa(i), Fingerprint: "f"}
			switch {
			case i < 80_000:
				return req, idem.Result{Status: 201}
			case i < 105_000:
				return req, idem.Result{Status: 201, Body: filler(100 + r.IntN(400))}
			}
			return req, idem.Result{Status: 201, Body: filler(2<<10 + r.IntN(6<<10))}
		}, 110_000},
		{"BoundedMapNotShrunk", 12 << 20, func(r *rand.Rand, i int) (idem.Request, idem.Result) {
			req := idem.Request{Scope: "s", Key: "k" + strconv.Itoa(i), Fingerprint: "f"}
			if i < 80_000 {
				return req, idem.Result{Status: 201}
			}
			return req, idem.Result{Status: 201, Body: filler(100 + r.IntN(400))}
		}, 105_000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tt.n)))
			before := heapAlloc()
			g, err := idem.New(discardStore{}, &idem.Config{ReplayCacheBytes: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.n {
				req, res := tt.fill(r, i)
				if _, _, err := g.Do(ctx, req, func(context.Context) (idem.Result, error) { return res, nil }); err != nil {
					t.Fatal(err)
				}
			}
			measured := heapAlloc() - before
			st := g.Stats()
			runtime.KeepAlive(g)
			t.Logf("%d entries: counted %d bytes, measured %d (%.3f)", st.ReplayCacheEntries, st.ReplayCacheBytes, measured, float64(st.ReplayCacheBytes)/float64(measured))
			if st.ReplayCacheBytes > tt.limit {
				t.Errorf("counted %d bytes, over the bound %d", st.ReplayCacheBytes, tt.limit)
			}
			if measured < 4<<20 {
				t.Fatalf("measured %d bytes: too few to tell the count from noise", measured)
			}
			if slack := measured/100 + 64<<10; st.ReplayCacheBytes < measured-slack {
				t.Errorf("counted %d bytes for a cache that takes %d on the heap: under by more than %d", st.ReplayCacheBytes, measured, slack)
			}
			if st.ReplayCacheBytes > measured*13/10 {
				t.Errorf("counted %d bytes for a cache that takes %d on the heap: over by more than 30%%", st.ReplayCacheBytes, measured)
			}
		})
	}
}

// A replay from the cache is the recorded result exactly, whatever its
// shape: nil and empty bodies and headers stay as they were, a name with
// no values keeps its place, values keep their order.
func TestReplayCacheKeepsEveryShape(t *testing.T) {
	t.Parallel()
	g, cs, _, _ := cacheSetup(t, nil)
	ctx := context.Background()
	for i, want := range []idem.Result{
		{Status: 204},
		{Status: 200, Body: []byte{}, Header: map[string][]string{}},
		{Status: 201, Body: []byte("{}"), Header: map[string][]string{"Location": {"/t/1"}, "X-Empty": {}, "X-Nil": nil, "Vary": {"a", "", "b"}}},
		{Status: 500, Header: map[string][]string{"": {""}, "X-Long": {string(filler(300))}}},
	} {
		req := idem.Request{Scope: "s", Key: "shape" + strconv.Itoa(i), Fingerprint: "fp"}
		if _, _, err := g.Do(ctx, req, func(context.Context) (idem.Result, error) { return want, nil }); err != nil {
			t.Fatal(err)
		}
		before := cs.begins.Load()
		got, replayed, err := g.Do(ctx, req, func(context.Context) (idem.Result, error) { return idem.Result{}, errors.New("ran again") })
		if err != nil || !replayed || cs.begins.Load() != before {
			t.Fatalf("shape %d: replayed=%v err=%v, want a replay from the cache", i, replayed, err)
		}
		// X-Nil comes back as an empty slice: both are no values.
		if v, ok := want.Header["X-Nil"]; ok && v == nil {
			want.Header["X-Nil"] = []string{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("shape %d: replay = %#v, want %#v", i, got, want)
		}
	}
}

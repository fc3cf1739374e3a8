package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/redisstore"
)

func benchRedis(b *testing.B) *redisstore.Store {
	b.Helper()
	c := redistest.Client(b)
	s, err := redisstore.New(c, &redisstore.Config{Prefix: redistest.Name(b, c)})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchPostgres(b *testing.B) *pgstore.Store {
	b.Helper()
	_, dsn := pgtest.Schema(b)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}

func emptyWork(context.Context, *idem.Run) (idem.Result, error) {
	return idem.Result{Status: 201, Body: []byte(`{"ok":true}`)}, nil
}

// BenchmarkLeasedRedisVsPostgres compares leased first executions (a
// claim, then a completion, through idem.Leased with an empty work) on
// the Redis of internal/redistest and on the PostgreSQL of
// internal/pgtest (pgstore), interleaved in rounds of 100 calls
// (internal/benchpair), by 1 caller and by 8 at once. It reports both
// rates and redis/postgres, Redis's rate divided by PostgreSQL's.
//
//	go test -run '^$' -bench LeasedRedisVsPostgres -benchtime 20x -count 3 ./redisstore/
func BenchmarkLeasedRedisVsPostgres(b *testing.B) {
	leasedRedisVsPostgres(b, benchRedis)
}

// leasedRedisVsPostgres is BenchmarkLeasedRedisVsPostgres on the Redis
// store newRedis returns.
func leasedRedisVsPostgres(b *testing.B, newRedis func(*testing.B) *redisstore.Store) {
	const perRound = 100
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			ctx := context.Background()
			stores := map[string]idem.LeasedStore{"redis": newRedis(b), "postgres": benchPostgres(b)}
			var seq int
			var mu sync.Mutex
			next := func() string {
				mu.Lock()
				defer mu.Unlock()
				seq++
				return fmt.Sprint("k", seq)
			}
			round := func(name string) func() time.Duration {
				l, err := idem.NewLeased(stores[name], nil)
				if err != nil {
					b.Fatal(err)
				}
				return func() time.Duration {
					start := time.Now()
					var wg sync.WaitGroup
					for c := range callers {
						wg.Go(func() {
							for range perRound / callers {
								key := next()
								_, replayed, err := l.Do(ctx, idem.LeasedRequest{Scope: "s", Key: key, Fingerprint: "fp"}, emptyWork)
								if err != nil || replayed {
									b.Errorf("%s caller %d: first execution of %s: replayed=%v err=%v", name, c, key, replayed, err)
									return
								}
							}
						})
					}
					wg.Wait()
					return time.Since(start)
				}
			}
			benchpair.Ratio(b, perRound/callers*callers, "ops",
				benchpair.Variant{Name: "postgres", Round: round("postgres")},
				benchpair.Variant{Name: "redis", Round: round("redis")})
		})
	}
}

// BenchmarkRedisReplay measures replays on Redis: claims of keys whose
// record is completed (one script run each, answering the recorded
// result), per second, by 1 caller and by 8 at once (b.RunParallel with
// -cpu), over 1000 completed keys.
//
//	go test -run '^$' -bench RedisReplay -benchtime 2s -cpu 1,8 -count 3 ./redisstore/
func BenchmarkRedisReplay(b *testing.B) {
	ctx := context.Background()
	s := benchRedis(b)
	l, err := idem.NewLeased(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	const keys = 1000
	for i := range keys {
		if _, _, err := l.Do(ctx, idem.LeasedRequest{Scope: "s", Key: fmt.Sprint("k", i), Fingerprint: "fp"}, emptyWork); err != nil {
			b.Fatal(err)
		}
	}
	var n sync.Mutex
	i := 0
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Lock()
			key := fmt.Sprint("k", i%keys)
			i++
			n.Unlock()
			c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Now: time.Now(), Lease: 30 * time.Second})
			if err != nil || c.Claimed || c.Record.State != idem.StateCompleted {
				b.Errorf("replay of %s: %+v, %v", key, c, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replays/s")
}

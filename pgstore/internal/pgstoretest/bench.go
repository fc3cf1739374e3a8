package pgstoretest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// The benchmarks share one shape: a pool of benchPoolSize connections on
// a schema with accounts and transfers, and the store's table.
const (
	benchAccounts = 1000
	benchPoolSize = 32
)

type benchEnv struct {
	*Env
	d     Driver
	guard *idem.Guard
	run   string // prefix that makes this run's keys unique
}

func benchSetup(b *testing.B, d Driver, cfg Config) *benchEnv {
	b.Helper()
	pgtest.Require(b)
	schema := pgtest.SchemaName(b)
	cfg.Schema = schema
	e, err := d.Open(context.Background(), b, Conn{SearchPath: schema, MaxConns: benchPoolSize}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL)`,
		fmt.Sprintf(`INSERT INTO accounts SELECT g, 1000000 FROM generate_series(1, %d) g`, benchAccounts),
		`CREATE TABLE transfers (id bigserial PRIMARY KEY, key text, src integer NOT NULL, dst integer NOT NULL, amount bigint NOT NULL)`,
		`VACUUM ANALYZE accounts`,
	} {
		if err := e.DB.Exec(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
	var r [4]byte
	_, _ = crand.Read(r[:])
	return &benchEnv{Env: e, d: d, guard: newGuard(b, e.Store, nil), run: hex.EncodeToString(r[:])}
}

// transfer is the effect: two balance updates, in id order so that
// concurrent transfers never deadlock, and the transfer row.
func transfer(ctx context.Context, tx pgschema.Querier, key string, rng *rand.Rand) error {
	a, c := 1+rng.IntN(benchAccounts), 1+rng.IntN(benchAccounts-1)
	if c >= a {
		c++
	}
	lo, hi := min(a, c), max(a, c)
	if err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = $1`, lo); err != nil {
		return err
	}
	if err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = $1`, hi); err != nil {
		return err
	}
	return tx.Exec(ctx, `INSERT INTO transfers (key, src, dst, amount) VALUES ($1, $2, $3, 1)`, key, lo, hi)
}

func (e *benchEnv) idemTransfer(ctx context.Context, key string, rng *rand.Rand) (bool, error) {
	_, replayed, err := e.guard.Do(ctx, idem.Request{Scope: "bench", Key: key, Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
		tx, err := e.d.Tx(ctx, nil)
		if err != nil {
			return idem.Result{}, err
		}
		if err := transfer(ctx, tx, key, rng); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"` + key + `","status":"done"}`)}, nil
	})
	return replayed, err
}

func (e *benchEnv) plainTransfer(ctx context.Context, key string, rng *rand.Rand) error {
	return e.InTx(ctx, func(tx pgschema.Querier) error {
		return transfer(ctx, tx, key, rng)
	})
}

// parallel runs b.N calls of op over conc goroutines and reports ops/s.
func parallel(b *testing.B, conc int, op func(n int64, rng *rand.Rand) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				n := next.Add(1) - 1
				if n >= int64(b.N) {
					return
				}
				if err := op(n, rng); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// BenchmarkTransfer compares a transfer with idem (Guard.Do, one new key a
// call) and without (a plain transaction), same pool, same concurrency.
func BenchmarkTransfer(b *testing.B, d Driver) {
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("Plain/conc=%d", conc), func(b *testing.B) {
			e := benchSetup(b, d, Config{})
			parallel(b, conc, func(n int64, rng *rand.Rand) error {
				return e.plainTransfer(context.Background(), fmt.Sprint(e.run, n), rng)
			})
		})
		for _, probe := range []bool{false, true} {
			b.Run(fmt.Sprintf("Idem/probe=%v/conc=%d", probe, conc), func(b *testing.B) {
				e := benchSetup(b, d, Config{ReplayProbe: probe})
				parallel(b, conc, func(n int64, rng *rand.Rand) error {
					_, err := e.idemTransfer(context.Background(), fmt.Sprint(e.run, n), rng)
					return err
				})
			})
		}
	}
}

// BenchmarkReplay measures retries of completed keys (replays), to compare
// with the first executions of BenchmarkTransfer/Idem at the same
// concurrency.
func BenchmarkReplay(b *testing.B, d Driver) {
	const keys = 2000
	for _, probe := range []bool{false, true} {
		for _, conc := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("probe=%v/conc=%d", probe, conc), func(b *testing.B) {
				e := benchSetup(b, d, Config{ReplayProbe: probe})
				rng := rand.New(rand.NewPCG(1, 2))
				for i := range keys {
					if _, err := e.idemTransfer(context.Background(), fmt.Sprint(e.run, i), rng); err != nil {
						b.Fatal(err)
					}
				}
				parallel(b, conc, func(n int64, rng *rand.Rand) error {
					replayed, err := e.idemTransfer(context.Background(), fmt.Sprint(e.run, n%keys), rng)
					if err == nil && !replayed {
						err = fmt.Errorf("key %d was not replayed", n%keys)
					}
					return err
				})
			})
		}
	}
}

const stormCallers = 100

// BenchmarkStorm sends 100 concurrent requests with one key, once an
// iteration: exactly one runs the transfer, the others are answered at
// once (in flight, or a replay once it committed). It reports the p50 and
// p99 latency of those answers beside the same storm of plain reads (one
// SELECT of an account each) and their ratio.
func BenchmarkStorm(b *testing.B, d Driver) {
	for _, probe := range []bool{false, true} {
		b.Run(fmt.Sprintf("probe=%v", probe), func(b *testing.B) {
			e := benchSetup(b, d, Config{ReplayProbe: probe})
			ctx := context.Background()
			var answers, reads []time.Duration
			var inFlight, replays int
			b.ResetTimer()
			// Two storms first, unmeasured, fill the pool with
			// connections that have every statement prepared.
			const warm = 2
			for i := range b.N + warm {
				if i == warm {
					answers, reads, inFlight, replays = nil, nil, 0, 0
				}
				key := fmt.Sprint(e.run, "-storm-", i)
				type result struct {
					d        time.Duration
					replayed bool
					err      error
				}
				results := make(chan result, stormCallers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for c := range stormCallers {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(c), uint64(i)))
						<-start
						t := time.Now()
						replayed, err := e.idemTransfer(ctx, key, rng)
						results <- result{time.Since(t), replayed, err}
					})
				}
				close(start)
				wg.Wait()
				close(results)
				executed := 0
				for r := range results {
					switch {
					case r.err == nil && !r.replayed:
						executed++
					case r.err == nil:
						replays++
						answers = append(answers, r.d)
					case errors.Is(r.err, idem.ErrInFlight):
						inFlight++
						answers = append(answers, r.d)
					default:
						b.Fatalf("storm answer: %v", r.err)
					}
				}
				var effects int
				if err := e.DB.QueryRow(ctx, `SELECT count(*) FROM transfers WHERE key = $1`, key).Scan(&effects); err != nil {
					b.Fatal(err)
				}
				if executed != 1 || effects != 1 {
					b.Fatalf("storm %d: %d executions, %d effects; want exactly 1", i, executed, effects)
				}

				// The same storm of plain reads.
				durs := make(chan time.Duration, stormCallers)
				start = make(chan struct{})
				for c := range stormCallers {
					wg.Go(func() {
						<-start
						t := time.Now()
						var bal int64
						if err := e.DB.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, 1+c%benchAccounts).Scan(&bal); err != nil {
							b.Error(err)
						}
						durs <- time.Since(t)
					})
				}
				close(start)
				wg.Wait()
				close(durs)
				for d := range durs {
					reads = append(reads, d)
				}
			}
			b.StopTimer()
			ap50, ap99 := percentile(answers, 50), percentile(answers, 99)
			rp50, rp99 := percentile(reads, 50), percentile(reads, 99)
			b.ReportMetric(ms(ap50), "answer-p50-ms")
			b.ReportMetric(ms(ap99), "answer-p99-ms")
			b.ReportMetric(ms(rp50), "read-p50-ms")
			b.ReportMetric(ms(rp99), "read-p99-ms")
			b.ReportMetric(ms(ap99)/ms(rp99), "p99-ratio")
			b.ReportMetric(float64(inFlight)/float64(b.N), "inflight/storm")
			b.ReportMetric(float64(replays)/float64(b.N), "replays/storm")
		})
	}
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkSweep deletes expired records with the Sweeper (batches of
// 1000) while 8 workers run idempotent transfers, and reports the sweep's
// rows/s, the transfers' ops/s during the sweep, and the p99 of the
// transfers during the sweep beside their p99 over as long a period just
// before it, without it (p99-ratio: during ÷ without). The records are
// 100 000 per iteration, or IDEM_BENCH_SWEEP_ROWS (docs/BENCHMARKS.md, "A
// day of keys").
func BenchmarkSweep(b *testing.B, d Driver) {
	sweepRows := 100_000
	if v := os.Getenv("IDEM_BENCH_SWEEP_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("IDEM_BENCH_SWEEP_ROWS=%q: want a positive number", v)
		}
		sweepRows = n
	}
	e := benchSetup(b, d, Config{})
	ctx := context.Background()
	now := time.Now()
	sw, err := idem.NewSweeper(e.Store, &idem.SweeperConfig{BatchSize: 1000})
	if err != nil {
		b.Fatal(err)
	}
	var swept, hot int
	var sweepTime time.Duration
	var base, during []time.Duration
	// load runs the 8 workers until stop is closed and returns their
	// transfers' latencies.
	load := func(stop <-chan struct{}) []time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 9))
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					t := time.Now()
					if _, err := e.idemTransfer(ctx, fmt.Sprint(e.run, "-hot-", w, "-", n, "-", time.Now().UnixNano()), rng); err != nil {
						b.Error(err)
						return
					}
					d := time.Since(t)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			})
		}
		<-stop
		wg.Wait()
		return lat
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for lo := 1; lo <= sweepRows; lo += 1_000_000 {
			hi := min(sweepRows, lo+1_000_000-1)
			if err := e.DB.Exec(ctx, `INSERT INTO idem_records (scope, key, fingerprint, state, status, body, created_at, expires_at)
SELECT 'old', 'k' || g, 'fp', 'completed', 200, '\x7b7d', $1::timestamptz - interval '2 days', $1::timestamptz - interval '1 day' + g * interval '1 ms'
FROM generate_series($2::int, $3::int) g`, now, lo, hi); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.DB.Exec(ctx, `VACUUM ANALYZE idem_records`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		// The same load, first without the sweep, for as long as the
		// last sweep took (or 3 s), then with it.
		period := max(3*time.Second, sweepTime/time.Duration(max(1, swept/sweepRows)))
		stop := make(chan struct{})
		time.AfterFunc(period, func() { close(stop) })
		base = append(base, load(stop)...)
		stop = make(chan struct{})
		lat := make(chan []time.Duration, 1)
		go func() { lat <- load(stop) }()
		t := time.Now()
		n, err := sw.Sweep(ctx)
		d := time.Since(t)
		close(stop)
		l := <-lat
		if err != nil {
			b.Fatal(err)
		}
		if n < sweepRows {
			b.Fatalf("swept %d, want ≥ %d", n, sweepRows)
		}
		during = append(during, l...)
		swept += n
		hot += len(l)
		sweepTime += d
	}
	b.StopTimer()
	b.ReportMetric(float64(swept)/sweepTime.Seconds(), "swept-rows/s")
	b.ReportMetric(float64(hot)/sweepTime.Seconds(), "hot-ops/s")
	bp99, dp99 := percentile(base, 99), percentile(during, 99)
	b.ReportMetric(ms(bp99), "p99-without-ms")
	b.ReportMetric(ms(dp99), "p99-sweep-ms")
	b.ReportMetric(ms(dp99)/ms(bp99), "p99-ratio")
}

// BenchmarkTransferRatio runs the transfer with and without idem on the same
// pool, alternating in rounds (plain, idem, idem, plain, …) so that the
// machine's noise and the tables' growth hit both alike, and reports the
// throughput ratio idem/plain. b.N is the number of rounds; each round runs
// 200 transfers per variant. Run it with a small -benchtime (for example
// 20x).
func BenchmarkTransferRatio(b *testing.B, d Driver) {
	const perRound = 200
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			e := benchSetup(b, d, Config{})
			var seq atomic.Int64
			round := func(idemOn bool) time.Duration {
				var next atomic.Int64
				var wg sync.WaitGroup
				start := time.Now()
				for w := range conc {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(w), uint64(seq.Add(1))))
						for next.Add(1) <= perRound {
							key := fmt.Sprint(e.run, "-", seq.Add(1))
							var err error
							if idemOn {
								_, err = e.idemTransfer(context.Background(), key, rng)
							} else {
								err = e.plainTransfer(context.Background(), key, rng)
							}
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				return time.Since(start)
			}
			benchpair.Ratio(b, perRound, "ops",
				benchpair.Variant{Name: "plain", Round: func() time.Duration { return round(false) }},
				benchpair.Variant{Name: "idem", Round: func() time.Duration { return round(true) }})
		})
	}
}

package sqldb_test

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/sqldb"
)

// The benchmarks share pgstore's shape: a pool of benchPoolSize
// connections on a schema with accounts and transfers, and the store's
// table, here through database/sql and pgx's stdlib driver.
const (
	benchAccounts = 1000
	benchPoolSize = 32
)

type benchEnv struct {
	db    *sql.DB
	guard *idem.Guard
	run   string // prefix that makes this run's keys unique
}

func benchSetup(b *testing.B, cfg *pgstore.Config) *benchEnv {
	b.Helper()
	pgtest.Require(b)
	schema := pgtest.SchemaName(b)
	db := newDB(b, dbOptions{schema: schema, maxConns: benchPoolSize})
	var c pgstore.Config
	if cfg != nil {
		c = *cfg
	}
	c.Schema = schema
	s, err := sqldb.New(context.Background(), db, &c)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL)`,
		fmt.Sprintf(`INSERT INTO accounts SELECT g, 1000000 FROM generate_series(1, %d) g`, benchAccounts),
		`CREATE TABLE transfers (id bigserial PRIMARY KEY, key text, src integer NOT NULL, dst integer NOT NULL, amount bigint NOT NULL)`,
		`VACUUM ANALYZE accounts`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	g, err := idem.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	var r [4]byte
	_, _ = crand.Read(r[:])
	return &benchEnv{db: db, guard: g, run: hex.EncodeToString(r[:])}
}

// transfer is the effect: two balance updates, in id order so that
// concurrent transfers never deadlock, and the transfer row.
func transfer(ctx context.Context, tx *sql.Tx, key string, rng *rand.Rand) error {
	a, c := 1+rng.IntN(benchAccounts), 1+rng.IntN(benchAccounts-1)
	if c >= a {
		c++
	}
	lo, hi := min(a, c), max(a, c)
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = $1`, lo); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = $1`, hi); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO transfers (key, src, dst, amount) VALUES ($1, $2, $3, 1)`, key, lo, hi)
	return err
}

func (e *benchEnv) idemTransfer(ctx context.Context, key string, rng *rand.Rand) (bool, error) {
	_, replayed, err := e.guard.Do(ctx, idem.Request{Scope: "bench", Key: key, Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqldb.TxFrom(ctx)
		if err := transfer(ctx, tx, key, rng); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"` + key + `","status":"done"}`)}, nil
	})
	return replayed, err
}

func (e *benchEnv) plainTransfer(ctx context.Context, key string, rng *rand.Rand) error {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := transfer(ctx, tx, key, rng); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
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

// BenchmarkTransfer compares a transfer with idem (Guard.Do on sqldb, one
// new key a call) and without (a plain database/sql transaction), same
// pool, same concurrency: the ratio of their ops/s is the overhead bar of
// DESIGN §5, here with the three extra round trips database/sql costs.
func BenchmarkTransfer(b *testing.B) {
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("Plain/conc=%d", conc), func(b *testing.B) {
			e := benchSetup(b, nil)
			parallel(b, conc, func(n int64, rng *rand.Rand) error {
				return e.plainTransfer(context.Background(), fmt.Sprint(e.run, n), rng)
			})
		})
		for _, probe := range []bool{false, true} {
			b.Run(fmt.Sprintf("Idem/probe=%v/conc=%d", probe, conc), func(b *testing.B) {
				e := benchSetup(b, &pgstore.Config{ReplayProbe: probe})
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
func BenchmarkReplay(b *testing.B) {
	const keys = 2000
	for _, probe := range []bool{false, true} {
		for _, conc := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("probe=%v/conc=%d", probe, conc), func(b *testing.B) {
				e := benchSetup(b, &pgstore.Config{ReplayProbe: probe})
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

// BenchmarkTransferRatio runs the transfer with and without idem on the same
// *sql.DB, alternating in rounds (plain, idem, idem, plain, …) so that the
// machine's noise and the tables' growth hit both alike, and reports the
// throughput ratio idem/plain, as pgstore's benchmark of the same name
// does. b.N is the number of rounds; each round runs 200 transfers per
// variant. Run it with a small -benchtime (for example 20x).
func BenchmarkTransferRatio(b *testing.B) {
	const perRound = 200
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			e := benchSetup(b, nil)
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
			round(false) // warm up both
			round(true)
			var plain, guarded time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 {
					plain += round(false)
					guarded += round(true)
				} else {
					guarded += round(true)
					plain += round(false)
				}
			}
			n := float64(b.N * perRound)
			b.ReportMetric(n/plain.Seconds(), "plain-ops/s")
			b.ReportMetric(n/guarded.Seconds(), "idem-ops/s")
			b.ReportMetric(plain.Seconds()/guarded.Seconds(), "idem/plain")
		})
	}
}

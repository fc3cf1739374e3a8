package sqldb_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore/sqldb"
)

// BenchmarkClaimVariants measures, in alternating rounds, the same
// transfer in a plain *sql.Tx and through Guard.Do on sqldb, claiming the
// key with the begin function of migration 3 (one round trip: idem-func)
// and with the lock and the read as two statements (two: idem-two), each
// in a schema of its own (docs/BENCHMARKS.md, "pgstore/sqldb").
func BenchmarkClaimVariants(b *testing.B) {
	pgtest.Require(b)
	const (
		perRound = 200
		accounts = 1000
	)
	type variant struct {
		name  string
		db    *sql.DB
		guard *idem.Guard
	}
	setup := func(name string, fn bool, withIdem bool) *variant {
		ctx := context.Background()
		schema := pgtest.SchemaName(b)
		db := newDB(b, dbOptions{schema: schema, maxConns: 32})
		s, err := sqldb.New(ctx, db, &sqldb.Config{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		sqldb.SetBeginFunc(s, fn)
		for _, q := range []string{
			`CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL)`,
			fmt.Sprintf(`INSERT INTO accounts SELECT g, 1000000 FROM generate_series(1, %d) g`, accounts),
			`CREATE TABLE transfers (id bigserial PRIMARY KEY, key text, src integer NOT NULL, dst integer NOT NULL, amount bigint NOT NULL)`,
			`VACUUM ANALYZE accounts`,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		v := &variant{name: name, db: db}
		if withIdem {
			if v.guard, err = idem.New(s, &idem.Config{ReplayCacheBytes: -1, DisableLocalInFlight: true}); err != nil {
				b.Fatal(err)
			}
		}
		return v
	}
	variants := []*variant{setup("plain", true, false), setup("idem-func", true, true), setup("idem-two", false, true)}
	transfer := func(ctx context.Context, tx *sql.Tx, key string, rng *rand.Rand) error {
		a, c := 1+rng.IntN(accounts), 1+rng.IntN(accounts-1)
		if c >= a {
			c++
		}
		lo, hi := min(a, c), max(a, c)
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, lo, 1); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + $2 WHERE id = $1`, hi, 1); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO transfers (key, src, dst, amount) VALUES ($1, $2, $3, $4)`, key, lo, hi, 1)
		return err
	}
	var seq atomic.Int64
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			round := func(v *variant) time.Duration {
				var next atomic.Int64
				var wg sync.WaitGroup
				start := time.Now()
				for w := range conc {
					wg.Go(func() {
						ctx := context.Background()
						rng := rand.New(rand.NewPCG(uint64(w), uint64(seq.Add(1))))
						for next.Add(1) <= perRound {
							key := fmt.Sprint("k-", seq.Add(1))
							var err error
							if v.guard == nil {
								var tx *sql.Tx
								if tx, err = v.db.BeginTx(ctx, nil); err == nil {
									if err = transfer(ctx, tx, key, rng); err == nil {
										err = tx.Commit()
									} else {
										_ = tx.Rollback()
									}
								}
							} else {
								_, _, err = v.guard.Do(ctx, idem.Request{Scope: "bench", Key: key, Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
									tx, _ := sqldb.TxFrom(ctx)
									if err := transfer(ctx, tx, key, rng); err != nil {
										return idem.Result{}, err
									}
									return idem.Result{Status: 201, Body: []byte(`{"id":"` + key + `"}`)}, nil
								})
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
			vs := make([]benchpair.Variant, len(variants))
			for k, v := range variants {
				vs[k] = benchpair.Variant{Name: v.name, Round: func() time.Duration { return round(v) }}
			}
			benchpair.Rates(b, perRound, "ops", vs[0], vs[1:]...)
		})
	}
}

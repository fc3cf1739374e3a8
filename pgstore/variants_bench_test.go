package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkFirstExecutionVariants measures, in one run and in alternating
// rounds, the same transfer (two balance updates and a row) in a plain
// transaction and through Guard.Do with the variants docs/BENCHMARKS.md
// ("Variants of a first execution") describes, each in a schema of its own:
//
//   - idem: the store as it is;
//   - idem-func: the lock and the read in one statement (the begin
//     function sqldb uses) instead of two;
//   - idem-noidle: without the idle_in_transaction_session_timeout that
//     the store sets for its transactions (IdleInTransactionTimeout < 0),
//     to see what that safety costs;
//   - idem-brin: the expires_at index as BRIN instead of B-tree, so that
//     a record adds one B-tree entry instead of two.
//
// It reports each variant's transfers per second and its ratio to plain.
func BenchmarkFirstExecutionVariants(b *testing.B) {
	pgtest.Require(b)
	const (
		perRound = 200
		accounts = 1000
	)
	type variant struct {
		name  string
		pool  *pgxpool.Pool
		guard *idem.Guard // nil: plain
	}
	setupVariant := func(name string, prep func(ctx context.Context, s *pgstore.Store, schema string)) *variant {
		ctx := context.Background()
		schema := pgtest.SchemaName(b)
		pool := newPool(b, schema, "", 32)
		cfg := &pgstore.Config{Schema: schema}
		if name == "idem-noidle" {
			cfg.IdleInTransactionTimeout = -1
		}
		s, err := pgstore.New(ctx, pool, cfg)
		if err != nil {
			b.Fatal(err)
		}
		for _, q := range []string{
			`CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL)`,
			fmt.Sprintf(`INSERT INTO accounts SELECT g, 1000000 FROM generate_series(1, %d) g`, accounts),
			`CREATE TABLE transfers (id bigserial PRIMARY KEY, key text, src integer NOT NULL, dst integer NOT NULL, amount bigint NOT NULL)`,
			`VACUUM ANALYZE accounts`,
		} {
			if _, err := pool.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		v := &variant{name: name, pool: pool}
		if prep != nil {
			prep(ctx, s, schema)
			v.guard, err = idem.New(s, &idem.Config{ReplayCacheBytes: -1, DisableLocalInFlight: true})
			if err != nil {
				b.Fatal(err)
			}
		}
		return v
	}
	none := func(context.Context, *pgstore.Store, string) {}
	variants := []*variant{
		setupVariant("plain", nil),
		setupVariant("idem", none),
		setupVariant("idem-func", func(_ context.Context, s *pgstore.Store, _ string) { pgstore.SetBeginFunc(s, true) }),
		setupVariant("idem-noidle", none),
		setupVariant("idem-brin", func(ctx context.Context, s *pgstore.Store, schema string) {
			idx := pgx.Identifier{schema, "idem_records_expires_at_idx"}.Sanitize()
			tbl := pgx.Identifier{schema, "idem_records"}.Sanitize()
			for _, q := range []string{`DROP INDEX ` + idx, `CREATE INDEX idem_records_expires_at_idx ON ` + tbl + ` USING brin (expires_at)`} {
				if _, err := s.Pool().Exec(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		}),
	}
	transfer := func(ctx context.Context, tx pgx.Tx, key string, rng *rand.Rand) error {
		a, c := 1+rng.IntN(accounts), 1+rng.IntN(accounts-1)
		if c >= a {
			c++
		}
		lo, hi := min(a, c), max(a, c)
		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $2 WHERE id = $1`, lo, 1); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + $2 WHERE id = $1`, hi, 1); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO transfers (key, src, dst, amount) VALUES ($1, $2, $3, $4)`, key, lo, hi, 1)
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
								err = pgx.BeginFunc(ctx, v.pool, func(tx pgx.Tx) error { return transfer(ctx, tx, key, rng) })
							} else {
								_, _, err = v.guard.Do(ctx, idem.Request{Scope: "bench", Key: key, Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
									tx, _ := pgstore.TxFrom(ctx)
									if err := transfer(ctx, tx, key, rng); err != nil {
										return idem.Result{}, err
									}
									return idem.Result{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"` + key + `","status":"done"}`)}, nil
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

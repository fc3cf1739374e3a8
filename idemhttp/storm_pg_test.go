package idemhttp_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgPool returns a pool whose connections use a fresh schema, dropped at
// clean-up. Without a server it skips, except under CI=true.
func pgPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	schema, dsn := pgtest.Schema(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, schema
}

// The duplicate storm against PostgreSQL, whose effect is a row written
// through the pgx.Tx that pgstore.TxFrom returns.
func TestStormPostgres(t *testing.T) {
	t.Parallel()
	pool, schema := pgPool(t)
	ctx := t.Context()
	store, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE transfers (id bigserial PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	testStorm(t, stormTarget{
		guard: g,
		effect: func(ctx context.Context) error {
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return errors.New("no pgstore transaction in the request context")
			}
			_, err := tx.Exec(ctx, `INSERT INTO transfers (amount) VALUES (10)`)
			return err
		},
		effects: func(t *testing.T) int {
			var n int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM transfers`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
	})
}

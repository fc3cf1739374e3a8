package idemhttp_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgDSN is the PostgreSQL server the test uses: IDEM_PG_DSN, or the local
// default.
func pgDSN() string {
	if dsn := os.Getenv("IDEM_PG_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// pgPool returns a pool whose connections use a fresh schema, dropped at
// clean-up. Without a server it skips, except under CI=true.
func pgPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgDSN())
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL at %s is unreachable under CI=true: %v", pgDSN(), err)
		}
		t.Skipf("PostgreSQL at %s is unreachable (set IDEM_PG_DSN, or start the server): %v", pgDSN(), err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "idemhttp_test_" + hex.EncodeToString(b[:])
	cfg, err := pgxpool.ParseConfig(pgDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
		pool.Close()
	})
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

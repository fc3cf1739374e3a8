package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultDSN is the local server the tests use unless IDEM_PG_DSN says
// otherwise.
const defaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func testDSN() string {
	if dsn := os.Getenv("IDEM_PG_DSN"); dsn != "" {
		return dsn
	}
	return defaultDSN
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireServer skips the test when the server cannot be reached, except
// under CI=true, where a missing server fails the run.
func requireServer(t testing.TB) {
	t.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testDSN())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		_ = conn.Close(ctx)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("PostgreSQL at %s is unreachable under CI=true: %v", testDSN(), reachErr)
	}
	t.Skipf("PostgreSQL at %s is unreachable (set IDEM_PG_DSN, or start the server): %v", testDSN(), reachErr)
}

// newPool returns a pool on the test database; it is closed at clean-up.
// schema, if not empty, becomes the search_path, and appName the
// application_name, of every connection.
func newPool(t testing.TB, schema, appName string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool, err := openPool(context.Background(), schema, appName, maxConns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func openPool(ctx context.Context, schema, appName string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(testDSN())
	if err != nil {
		return nil, err
	}
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	if appName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = appName
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// newSchemaName returns a fresh schema name and drops the schema, if it was
// created, at clean-up.
func newSchemaName(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "idem_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testDSN())
		if err != nil {
			t.Logf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", name, err)
		}
	})
	return name
}

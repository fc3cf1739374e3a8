package pgstore_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

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
	cfg, err := pgxpool.ParseConfig(pgtest.DSN())
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

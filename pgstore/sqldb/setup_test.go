package sqldb_test

import (
	"cmp"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// TestMain skips the examples when the server cannot be reached outside
// CI: unlike tests, an example cannot skip itself, and pgtest's rule is
// that a missing server is a skip outside CI and a failure under CI=true.
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("CI") != "true" && !reachable() {
		fmt.Fprintf(os.Stderr, "sqldb: PostgreSQL at %s is unreachable: skipping the examples\n", pgtest.DSN())
		skip := "^Example"
		if f := flag.Lookup("test.skip"); f != nil {
			if cur := f.Value.String(); cur != "" {
				skip = cur + "|" + skip
			}
			_ = f.Value.Set(skip)
		}
	}
	os.Exit(m.Run())
}

func reachable() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.DSN())
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx) == nil
}

// dbOptions shape a test database handle.
type dbOptions struct {
	dsn      string // the server; pgtest.DSN() when empty
	schema   string // the search_path, if not empty
	appName  string // the application_name, if not empty
	maxConns int    // SetMaxOpenConns and SetMaxIdleConns, if positive
	runtime  map[string]string
	dial     pgconn.DialFunc
	noPing   bool // never ping a connection database/sql hands out again
}

// openDB returns a *sql.DB on the test database through pgx's stdlib
// driver.
func openDB(o dbOptions) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(cmp.Or(o.dsn, pgtest.DSN()))
	if err != nil {
		return nil, err
	}
	if o.schema != "" {
		cfg.RuntimeParams["search_path"] = o.schema
	}
	if o.appName != "" {
		cfg.RuntimeParams["application_name"] = o.appName
	}
	for k, v := range o.runtime {
		cfg.RuntimeParams[k] = v
	}
	if o.dial != nil {
		cfg.DialFunc = o.dial
	}
	var opts []stdlib.OptionOpenDB
	if o.noPing {
		opts = append(opts, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false }))
	}
	db := stdlib.OpenDB(*cfg, opts...)
	if o.maxConns > 0 {
		db.SetMaxOpenConns(o.maxConns)
		db.SetMaxIdleConns(o.maxConns)
	}
	return db, nil
}

// newDB is openDB for a test: the handle is closed at clean-up.
func newDB(t testing.TB, o dbOptions) *sql.DB {
	t.Helper()
	db, err := openDB(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newPool returns a pgxpool on the test database whose search_path is
// schema, for pgstore beside sqldb; it is closed at clean-up.
func newPool(t testing.TB, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

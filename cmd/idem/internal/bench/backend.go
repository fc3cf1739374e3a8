package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/mysqlurl"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/jackc/pgx/v5"
)

// backend is the database of a run: the idem store and the ledger in it.
type backend struct {
	kind   string // "sqlite", "postgres" or "mysql"
	desc   string // for the report, without a password
	pool   int
	probe  bool // pgstore.Config.ReplayProbe
	store  idem.Store
	ledger *transfers.Database

	// second opens a second store and ledger on the same database, with
	// a pool of its own, as a second server instance would; nil where a
	// second instance cannot share the database (SQLite: one process per
	// file). The backend's close closes it.
	second func(ctx context.Context) (idem.Store, *transfers.Database, error)

	// prefill writes live records into the records table (see
	// Config.LiveRecords) and measures it.
	prefill func(ctx context.Context, n int) (*Records, error)

	// transfers counts the rows of the ledger's transfers table.
	transfers func(ctx context.Context) (int64, error)
	// close closes the store and removes what open created.
	close func(ctx context.Context) error
}

// IsPostgres reports whether db names a PostgreSQL database.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

func open(ctx context.Context, db string, probe bool, pool, probeConns int) (*backend, error) {
	if IsPostgres(db) {
		return openPostgres(ctx, db, probe, pool, probeConns)
	}
	if mysqlurl.IsURL(db) {
		return openMySQL(ctx, db, probe, pool, probeConns)
	}
	return openSQLite(ctx, db)
}

// openSQLite opens the file at path, or a fresh file in a temporary
// directory when path is empty.
func openSQLite(ctx context.Context, path string) (*backend, error) {
	cleanup := func() {}
	if path == "" {
		dir, err := os.MkdirTemp("", "idem-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		path = filepath.Join(dir, "bench.db")
		cleanup = func() { os.RemoveAll(dir) }
	}
	s, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("bench: open %s: %w", path, err)
	}
	return &backend{
		kind:   "sqlite",
		desc:   path,
		pool:   s.DB().Stats().MaxOpenConnections,
		store:  s,
		ledger: transfers.SQLite(s),
		prefill: func(ctx context.Context, n int) (*Records, error) {
			return prefillSQLite(ctx, s.DB(), n)
		},
		transfers: func(ctx context.Context) (n int64, err error) {
			err = s.DB().QueryRowContext(ctx, `SELECT count(*) FROM transfers`).Scan(&n)
			return n, err
		},
		close: func(context.Context) error {
			err := s.Close()
			cleanup()
			return err
		},
	}, nil
}

// openPostgres creates a fresh schema in the database at dsn, opens a
// store whose connections and records work in it, and drops the schema on
// close. A positive pool sets the pool's size.
func openPostgres(ctx context.Context, dsn string, probe bool, pool, probeConns int) (*backend, error) {
	schema, scoped, err := freshSchema(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: create a schema in %s: %w", redact(dsn), err)
	}
	if pool > 0 {
		scoped += "&pool_max_conns=" + strconv.Itoa(pool)
	}
	drop := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		return err
	}
	s, err := pgstore.Open(ctx, scoped, &pgstore.Config{Schema: schema, ReplayProbe: probe, ProbeConns: probeConns})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: open %s: %w", redact(dsn), err), drop(context.WithoutCancel(ctx)))
	}
	table := pgx.Identifier{schema, "transfers"}.Sanitize()
	var others []*pgstore.Store
	return &backend{
		second: func(ctx context.Context) (idem.Store, *transfers.Database, error) {
			s2, err := pgstore.Open(ctx, scoped, &pgstore.Config{Schema: schema, ReplayProbe: probe, ProbeConns: probeConns, SkipMigrate: true})
			if err != nil {
				return nil, nil, fmt.Errorf("bench: open a second instance: %w", err)
			}
			others = append(others, s2)
			return s2, transfers.Postgres(s2), nil
		},
		kind:   "postgres",
		probe:  probe,
		desc:   redact(dsn) + " (schema " + schema + ", dropped at the end)",
		pool:   int(s.Pool().Config().MaxConns),
		store:  s,
		ledger: transfers.Postgres(s),
		prefill: func(ctx context.Context, n int) (*Records, error) {
			return prefillPostgres(ctx, s.Pool(), schema, n)
		},
		transfers: func(ctx context.Context) (n int64, err error) {
			err = s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n)
			return n, err
		},
		close: func(ctx context.Context) error {
			for _, o := range others {
				o.Close()
			}
			s.Close()
			return drop(ctx)
		},
	}, nil
}

// freshSchema creates a new schema in the database at dsn and returns its
// name and a URL whose connections work in it.
func freshSchema(ctx context.Context, dsn string) (schema, scoped string, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", "", err
	}
	defer conn.Close(ctx)
	schema = fmt.Sprintf("idem_bench_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", "", err
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return schema, dsn + sep + "search_path=" + schema, nil
}

// redact hides a password in a database URL.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "…"
	}
	return u.Redacted()
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultDB is the SQLite file used when -db is not given.
const defaultDB = "idem.db"

// backend is an opened -db: the idem store and the ledger in the same
// database.
type backend struct {
	store  idem.Store
	ledger *transfers.Database
	pool   *pgxpool.Pool // PostgreSQL's connection pool; nil on SQLite
	close  func() error
}

func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// backendOptions tune openBackend; the zero value means defaults.
type backendOptions struct {
	// replayProbe sets pgstore.Config.ReplayProbe.
	replayProbe bool
	// existing opens an existing database without migrating it, and
	// refuses a missing one or one without a records table rather than
	// creating it (for the commands that look after existing records).
	existing bool
	// readOnly, with existing, opens the database read-only (idem
	// inspect): on SQLite it opens beside a running idem serve.
	readOnly bool
	// pool is the PostgreSQL pool size (pool_max_conns); 0 keeps the
	// URL's, or pgxpool's default. Unless poolExplicit, a pool_max_conns
	// in the URL wins over it.
	pool         int
	poolExplicit bool
	// lockedHint is added to the error when another process holds a
	// SQLite file; empty means the hint for the commands that look after
	// records (a running idem serve sweeps its own database).
	lockedHint string
}

// openBackend opens a SQLite file path, a postgres:// URL or a mysql:// URL. Its errors name
// the database with any password hidden.
func openBackend(ctx context.Context, db string, opts backendOptions) (*backend, error) {
	b, err := open(ctx, db, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redact(db), err)
	}
	return b, nil
}

func open(ctx context.Context, db string, opts backendOptions) (*backend, error) {
	if isRedis(db) {
		// The commands refuse it first, with their own reason (needSQL,
		// ledgerDB); this is the backstop.
		return nil, usageError{"a Redis server keeps only the leased records of payouts; this needs the SQL database (a SQLite file path, a postgres:// URL or a mysql:// URL)"}
	}
	if isMySQL(db) {
		return openMySQL(ctx, db, opts)
	}
	if isPostgres(db) {
		// The records live beside the ledger: pgstore uses the
		// connection's current schema (the URL's search_path, if any).
		if opts.pool > 0 {
			var err error
			if db, err = withPoolSize(db, opts.pool, opts.poolExplicit); err != nil {
				return nil, err
			}
		}
		s, err := pgstore.Open(ctx, db, &pgstore.Config{ReplayProbe: opts.replayProbe, SkipMigrate: opts.existing})
		if err != nil {
			return nil, err
		}
		if opts.existing {
			if err := hasRecordsTable(ctx, s.Pool()); err != nil {
				s.Close()
				return nil, err
			}
		}
		return &backend{store: s, ledger: transfers.Postgres(s), pool: s.Pool(), close: s.Close}, nil
	}
	var cfg *sqlitestore.Config
	if opts.existing {
		if _, err := os.Stat(db); err != nil {
			return nil, fmt.Errorf("no database there (%w); give the -db that idem serve used", err)
		}
		// Neither creates nor migrates anything; a file without idem's
		// tables is refused with sqlitestore.ErrSchema.
		cfg = &sqlitestore.Config{ReadOnly: opts.readOnly, SkipMigrate: !opts.readOnly}
	}
	s, err := sqlitestore.Open(ctx, db, cfg)
	if errors.Is(err, sqlitestore.ErrLocked) && !opts.readOnly {
		hint := opts.lockedHint
		if hint == "" {
			hint = "a running idem serve sweeps its own database"
		}
		return nil, fmt.Errorf("%w (%s)", err, hint)
	}
	if err != nil {
		return nil, err
	}
	return &backend{store: s, ledger: transfers.SQLite(s), close: s.Close}, nil
}

// hasRecordsTable checks that the connection's current schema holds the
// records table, so that a command that must not create it can say what is
// wrong (a misspelled search_path, a database idem serve never used)
// instead of failing on a missing relation.
func hasRecordsTable(ctx context.Context, pool *pgxpool.Pool) error {
	var schema *string
	var found bool
	err := pool.QueryRow(ctx,
		`SELECT current_schema(), to_regclass(format('%I.%I', current_schema(), $1::text)) IS NOT NULL`,
		pgstore.DefaultTable).Scan(&schema, &found)
	switch {
	case err != nil:
		return err
	case schema == nil:
		return errors.New("the search_path names no schema that exists; check -db's search_path")
	case !found:
		return fmt.Errorf("no records table %q in schema %q (idem serve creates it when it starts); check -db's search_path", pgstore.DefaultTable, *schema)
	}
	return nil
}

// withPoolSize sets pool_max_conns in a postgres:// URL that does not set
// it. A URL that does keeps its own, unless the size was given explicitly
// and differs: two sizes are a mistake to point out, not to settle
// silently.
func withPoolSize(db string, n int, explicit bool) (string, error) {
	u, err := url.Parse(db)
	if err != nil {
		return "", err
	}
	q := u.Query()
	want := strconv.Itoa(n)
	if got := q.Get("pool_max_conns"); got != "" {
		if explicit && got != want {
			return "", usageError{fmt.Sprintf("-pool %d conflicts with pool_max_conns=%s in -db; give one of them", n, got)}
		}
		return db, nil
	}
	q.Set("pool_max_conns", want)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// redact hides the passwords in a database URL (postgres://, mysql:// or redis://)
// for logs and errors: the one in user:password@ and the password and
// sslpassword parameters, which pgx accepts in the query too.
func redact(db string) string {
	if !isSQLServer(db) && !isRedis(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return db[:strings.Index(db, "://")+3] + "…"
	}
	q := u.Query()
	hidden := false
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			hidden = true
		}
	}
	if hidden {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

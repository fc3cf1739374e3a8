package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/transfers"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// defaultDB is the SQLite file used when -db is not given.
const defaultDB = "idem.db"

// backend is an opened -db: the idem store and the ledger in the same
// database.
type backend struct {
	store  idem.Store
	ledger *transfers.Database
	close  func() error
}

func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// backendOptions tune openBackend; the zero value means defaults.
type backendOptions struct {
	// replayProbe sets pgstore.Config.ReplayProbe.
	replayProbe bool
	// mustExist refuses a SQLite path with no file, rather than creating
	// an empty database (for commands that read existing records).
	mustExist bool
}

// openBackend opens a SQLite file path or a postgres:// URL. Its errors name
// the database with any password hidden.
func openBackend(ctx context.Context, db string, opts backendOptions) (*backend, error) {
	b, err := open(ctx, db, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", redact(db), err)
	}
	return b, nil
}

func open(ctx context.Context, db string, opts backendOptions) (*backend, error) {
	if isPostgres(db) {
		// The records live beside the ledger: in the schema named by the
		// URL's search_path, if any, else in public.
		cfg := &pgstore.Config{ReplayProbe: opts.replayProbe}
		if u, err := url.Parse(db); err == nil {
			if sp := u.Query().Get("search_path"); sp != "" && !strings.Contains(sp, ",") {
				cfg.Schema = strings.TrimSpace(sp)
			}
		}
		s, err := pgstore.Open(ctx, db, cfg)
		if err != nil {
			return nil, err
		}
		return &backend{store: s, ledger: transfers.Postgres(s), close: s.Close}, nil
	}
	if opts.mustExist {
		if _, err := os.Stat(db); err != nil {
			return nil, fmt.Errorf("no database there (%w); give the -db that idem serve used", err)
		}
	}
	s, err := sqlitestore.Open(ctx, db, nil)
	if err != nil {
		return nil, err
	}
	return &backend{store: s, ledger: transfers.SQLite(s), close: s.Close}, nil
}

// redact hides the passwords in a database URL for logs and errors: the
// one in user:password@ and the password and sslpassword parameters, which
// pgx accepts in the query too.
func redact(db string) string {
	if !isPostgres(db) {
		return db
	}
	u, err := url.Parse(db)
	if err != nil {
		return "postgres://…"
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

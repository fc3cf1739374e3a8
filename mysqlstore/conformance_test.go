package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/leasetest"
	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/storetest"
)

// newLocation is a fresh database, dropped at clean-up, named by a DSN
// whose connections use it: the store's tables and the effects table live
// there.
func newLocation(t testing.TB) string {
	_, dsn := mysqltest.Database(t)
	return dsn
}

// openWithEffects opens the store at dsn with the effects table.
func openWithEffects(ctx context.Context, dsn string, cfg *mysqlstore.Config) (*mysqlstore.Store, error) {
	s, err := mysqlstore.Open(ctx, dsn, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS effects (name VARBINARY(255) NOT NULL) ENGINE = InnoDB`); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// execTx runs statements through the transaction that ctx carries.
func execTx(ctx context.Context, stmts ...string) error {
	tx, ok := mysqlstore.TxFrom(ctx)
	if !ok {
		return errors.New("no mysqlstore transaction in the context")
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

func effect(ctx context.Context, name string) error {
	tx, ok := mysqlstore.TxFrom(ctx)
	if !ok {
		return errors.New("no mysqlstore transaction in the context")
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES (?)`, name)
	return err
}

func countEffects(ctx context.Context, s *mysqlstore.Store, name string) (int, error) {
	var n int
	err := s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM effects WHERE name = ?`, name).Scan(&n)
	return n, err
}

func conformance(t *testing.T, cfg *mysqlstore.Config) {
	conformanceOn(t, newLocation, func(ctx context.Context, dsn string) (*mysqlstore.Store, error) {
		return openWithEffects(ctx, dsn, cfg)
	}, "deferred")
}

// conformanceOn runs storetest on stores that open opens at the locations
// newLoc makes, each of which must run atomic work by path.
func conformanceOn(t *testing.T, newLoc func(testing.TB) string, open func(context.Context, string) (*mysqlstore.Store, error), path string) {
	storetest.Run(t, storetest.Harness{
		NewLocation: newLoc,
		Open: func(ctx context.Context, dsn string) (idem.Store, error) {
			s, err := open(ctx, dsn)
			if err == nil {
				if got := mysqlstore.Path(s); got != path {
					_ = s.Close()
					return nil, fmt.Errorf("the store runs atomic work by %s, want %s", got, path)
				}
			}
			return s, err
		},
		Close: func(s idem.Store) error {
			ms := s.(*mysqlstore.Store)
			return errors.Join(ms.Close(), ms.DB().Close()) // New's db is the test's to close
		},
		Persistent: true,
		Effect:     effect,
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			return countEffects(ctx, s.(*mysqlstore.Store), name)
		},
		// The Tx holds the key's user-level lock, which a writer that
		// ignores it does not ask for: the record commits from another
		// connection.
		PlantRecord: func(ctx context.Context, s idem.Store, rec *idem.Record) (bool, error) {
			_, err := s.(*mysqlstore.Store).DB().ExecContext(ctx, "REPLACE INTO idem_records (scope, `key`, fingerprint, state, status, body, created_at, expires_at, kind, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', '')",
				rec.Scope, rec.Key, rec.Fingerprint, string(rec.State), rec.Result.Status, append([]byte{}, rec.Result.Body...),
				rec.CreatedAt.UnixMicro(), rec.ExpiresAt.UnixMicro())
			return false, err
		},
		// "ROLLBACK; BEGIN" is two statements: go-sql-driver sends one at
		// a time unless the DSN has multiStatements.
		EndTx: func(ctx context.Context, end storetest.TxEnd) error {
			return execTx(ctx, strings.Split(string(end), "; ")...)
		},
		// InnoDB has no deferred constraint, so no statement can succeed
		// and make COMMIT fail: FailCommit is left out.
	})
}

func TestConformance(t *testing.T) { conformance(t, nil) }

func TestConformanceReplayProbe(t *testing.T) {
	conformance(t, &mysqlstore.Config{ReplayProbe: true})
}

// On a *sql.DB of the caller's (New), database/sql begins and commits
// the transaction around the procedures (the begin procedure commits
// database/sql's, empty, before its reads and begins the work's).
func TestConformanceNew(t *testing.T) {
	conformanceOn(t, newLocation, func(ctx context.Context, dsn string) (*mysqlstore.Store, error) {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return nil, err
		}
		s, err := mysqlstore.New(ctx, db, nil)
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS effects (name VARBINARY(255) NOT NULL) ENGINE = InnoDB`); err != nil {
			_ = db.Close()
			return nil, err
		}
		return s, nil
	}, "procedures")
}

// An account that may not create routines gets a store that sends the
// statements one by one.
func TestConformanceWithoutRoutines(t *testing.T) {
	conformanceOn(t, func(t testing.TB) string {
		return mysqltest.WithoutRoutines(t, newLocation(t))
	}, func(ctx context.Context, dsn string) (*mysqlstore.Store, error) {
		return openWithEffects(ctx, dsn, nil)
	}, "statements")
}

func TestLeasedConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		NewLocation: newLocation,
		Persistent:  true,
		Open: func(ctx context.Context, dsn string) (idem.LeasedStore, error) {
			return openWithEffects(ctx, dsn, nil)
		},
		Close:  func(s idem.LeasedStore) error { return s.(*mysqlstore.Store).Close() },
		Effect: effect,
		CountEffects: func(ctx context.Context, s idem.LeasedStore, name string) (int, error) {
			return countEffects(ctx, s.(*mysqlstore.Store), name)
		},
	})
}

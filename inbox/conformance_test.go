package inbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox/inboxtest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// The inbox's conformance suite on each store of the module.

func TestInboxMemstore(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness{
		NewLocation: func(testing.TB) string { return "" },
		Open:        func(context.Context, string) (idem.Store, error) { return memstore.New(), nil },
		Effect: func(ctx context.Context, name string) error {
			tx, ok := memstore.TxFrom(ctx)
			if !ok {
				return errors.New("no memstore transaction in the context")
			}
			n, _ := tx.Get(name)
			tx.Set(name, n+"x")
			return nil
		},
		CountEffects: func(_ context.Context, s idem.Store, name string) (int, error) {
			v, _ := s.(*memstore.Store).Value(name)
			return len(v), nil
		},
	})
}

func TestInboxSQLite(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness{
		NewLocation: func(t testing.TB) string { return filepath.Join(t.TempDir(), "inbox.db") },
		Open: func(ctx context.Context, path string) (idem.Store, error) {
			s, err := sqlitestore.Open(ctx, path, nil)
			if err != nil {
				return nil, err
			}
			if _, err := s.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS effects (name TEXT NOT NULL)`); err != nil {
				s.Close()
				return nil, err
			}
			return s, nil
		},
		Close:      func(s idem.Store) error { return s.(*sqlitestore.Store).Close() },
		Persistent: true,
		Effect: func(ctx context.Context, name string) error {
			tx, ok := sqlitestore.TxFrom(ctx)
			if !ok {
				return errors.New("no sqlitestore transaction in the context")
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES (?)`, name)
			return err
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			var n int
			err := s.(*sqlitestore.Store).DB().QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE name = ?`, name).Scan(&n)
			return n, err
		},
	})
}

func TestInboxPostgres(t *testing.T) {
	pgtest.Require(t)
	inboxtest.Run(t, inboxtest.Harness{
		// A fresh schema per case; the location is a DSN whose
		// search_path names it.
		NewLocation: func(t testing.TB) string {
			_, dsn := pgtest.Schema(t)
			return dsn + "&pool_max_conns=4"
		},
		Open: func(ctx context.Context, dsn string) (idem.Store, error) {
			s, err := pgstore.Open(ctx, dsn, nil)
			if err != nil {
				return nil, err
			}
			if _, err := s.Pool().Exec(ctx, `CREATE TABLE IF NOT EXISTS effects (name text NOT NULL)`); err != nil {
				s.Close()
				return nil, err
			}
			return s, nil
		},
		Close:      func(s idem.Store) error { return s.(*pgstore.Store).Close() },
		Persistent: true,
		Effect: func(ctx context.Context, name string) error {
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return errors.New("no pgstore transaction in the context")
			}
			_, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
			return err
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			var n int
			err := s.(*pgstore.Store).Pool().QueryRow(ctx, `SELECT count(*) FROM effects WHERE name = $1`, name).Scan(&n)
			return n, err
		},
	})
}

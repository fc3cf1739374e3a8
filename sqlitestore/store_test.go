package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/idemkit/idem/storetest"
)

func openWithEffects(ctx context.Context, path string) (idem.Store, error) {
	s, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS effects (name TEXT NOT NULL)`); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewLocation: func(t *testing.T) string { return filepath.Join(t.TempDir(), "idem.db") },
		Open:        openWithEffects,
		Close:       func(s idem.Store) error { return s.(*sqlitestore.Store).Close() },
		Persistent:  true,
		Effect: func(ctx context.Context, name string) error {
			tx, ok := sqlitestore.TxFrom(ctx)
			if !ok {
				return errors.New("no sqlitestore transaction in context")
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

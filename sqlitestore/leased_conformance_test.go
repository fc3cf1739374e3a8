package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/leasetest"
	"github.com/idemkit/idem/sqlitestore"
)

func TestLeasedConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		NewLocation: func(t testing.TB) string { return filepath.Join(t.TempDir(), "idem.db") },
		Open: func(ctx context.Context, path string) (idem.LeasedStore, error) {
			s, err := openWithEffects(ctx, path)
			if err != nil {
				return nil, err
			}
			return s.(*sqlitestore.Store), nil
		},
		Close:      func(s idem.LeasedStore) error { return s.(*sqlitestore.Store).Close() },
		Persistent: true,
		// A local step writes through sqlitestore.TxFrom, as atomic work.
		Effect: func(ctx context.Context, name string) error {
			return execTx(ctx, `INSERT INTO effects (name) VALUES (?)`, name)
		},
		CountEffects: func(ctx context.Context, s idem.LeasedStore, name string) (int, error) {
			var n int
			err := s.(*sqlitestore.Store).DB().QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE name = ?`, name).Scan(&n)
			return n, err
		},
	})
}

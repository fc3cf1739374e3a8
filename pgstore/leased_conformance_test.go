package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/leasetest"
	"github.com/idemkit/idem/pgstore"
)

// TestLeasedConformance runs the leased-mode suite on pgstore. Each
// location is a fresh schema, named by a DSN whose connections have it as
// their search_path: the store's tables and the effects table live there.
func TestLeasedConformance(t *testing.T) {
	pgtest.Require(t)
	leasetest.Run(t, leasedHarness(func(t testing.TB) string {
		_, dsn := pgtest.Schema(t)
		return dsn
	}))
}

// leasedHarness is the leased-mode harness of pgstore, each location a
// DSN that newLocation returns.
func leasedHarness(newLocation func(t testing.TB) string) leasetest.Harness {
	return leasetest.Harness{
		NewLocation: newLocation,
		Persistent:  true,
		Open: func(ctx context.Context, location string) (idem.LeasedStore, error) {
			s, err := pgstore.Open(ctx, location, nil)
			if err != nil {
				return nil, err
			}
			if _, err := s.Pool().Exec(ctx, `CREATE TABLE IF NOT EXISTS effects (name text NOT NULL)`); err != nil {
				_ = s.Close()
				return nil, err
			}
			return s, nil
		},
		Close: func(s idem.LeasedStore) error { return s.(*pgstore.Store).Close() },
		Effect: func(ctx context.Context, name string) error {
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return errors.New("no pgstore transaction in the local step's context")
			}
			_, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
			return err
		},
		CountEffects: func(ctx context.Context, s idem.LeasedStore, name string) (int, error) {
			var n int
			err := s.(*pgstore.Store).Pool().QueryRow(ctx, `SELECT count(*) FROM effects WHERE name = $1`, name).Scan(&n)
			return n, err
		},
	}
}

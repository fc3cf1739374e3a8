package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestConformance(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, conformanceHarness(nil))
}

func TestConformanceReplayProbe(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, conformanceHarness(&pgstore.Config{ReplayProbe: true}))
}

// conformanceHarness runs each storetest case in a schema of its own: the
// store's table and the effects table live there, and the pools' search_path
// names it. base is copied for each store; its Schema is set to the
// location.
func conformanceHarness(base *pgstore.Config) storetest.Harness {
	var pools sync.Map // *pgstore.Store → *pgxpool.Pool
	return storetest.Harness{
		NewLocation: func(t *testing.T) string { return pgtest.SchemaName(t) },
		Persistent:  true,
		Open: func(ctx context.Context, location string) (idem.Store, error) {
			pool, err := openPool(ctx, location, "", 8)
			if err != nil {
				return nil, err
			}
			var cfg pgstore.Config
			if base != nil {
				cfg = *base
			}
			cfg.Schema = location
			s, err := pgstore.New(ctx, pool, &cfg)
			if err == nil {
				_, err = pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{location, "effects"}.Sanitize()+` (name text NOT NULL)`)
			}
			if err != nil {
				pool.Close()
				return nil, err
			}
			pools.Store(s, pool)
			return s, nil
		},
		Close: func(s idem.Store) error {
			if p, ok := pools.LoadAndDelete(s); ok {
				p.(*pgxpool.Pool).Close()
			}
			return nil
		},
		Effect: func(ctx context.Context, name string) error {
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return errors.New("no pgstore transaction in the context")
			}
			_, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
			return err
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			p, ok := pools.Load(s)
			if !ok {
				return 0, fmt.Errorf("store %p is closed", s)
			}
			var n int
			err := p.(*pgxpool.Pool).QueryRow(ctx, `SELECT count(*) FROM effects WHERE name = $1`, name).Scan(&n)
			return n, err
		},
	}
}

package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/sqldb"
	"github.com/idemkit/idem/storetest"
	"github.com/jackc/pgx/v5"
)

func TestConformance(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, conformanceHarness(nil))
}

func TestConformanceReplayProbe(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, conformanceHarness(&pgstore.Config{ReplayProbe: true}))
}

// conformanceHarness runs each storetest case in a schema of its own,
// through pgx's stdlib driver: the store's table and the effects table
// live there, and the connections' search_path names it. base is copied
// for each store; its Schema is set to the location.
func conformanceHarness(base *pgstore.Config) storetest.Harness {
	var dbs sync.Map // *sqldb.Store → *sql.DB
	return storetest.Harness{
		NewLocation: func(t *testing.T) string { return pgtest.SchemaName(t) },
		Persistent:  true,
		Open: func(ctx context.Context, location string) (idem.Store, error) {
			db, err := openDB(dbOptions{schema: location, maxConns: 8})
			if err != nil {
				return nil, err
			}
			var cfg pgstore.Config
			if base != nil {
				cfg = *base
			}
			cfg.Schema = location
			s, err := sqldb.New(ctx, db, &cfg)
			if err == nil {
				_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{location, "effects"}.Sanitize()+` (name text NOT NULL)`)
			}
			if err != nil {
				db.Close()
				return nil, err
			}
			dbs.Store(s, db)
			return s, nil
		},
		Close: func(s idem.Store) error {
			if db, ok := dbs.LoadAndDelete(s); ok {
				return db.(*sql.DB).Close()
			}
			return nil
		},
		Effect: func(ctx context.Context, name string) error {
			tx, ok := sqldb.TxFrom(ctx)
			if !ok {
				return errors.New("no sqldb transaction in the context")
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
			return err
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			db, ok := dbs.Load(s)
			if !ok {
				return 0, fmt.Errorf("store %p is closed", s)
			}
			var n int
			err := db.(*sql.DB).QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE name = $1`, name).Scan(&n)
			return n, err
		},
	}
}

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
	storetest.Run(t, conformanceHarness(&sqldb.Config{ReplayProbe: true}))
}

// conformanceTables are the tables the harness writes to, in schema %[1]s:
// effects, and doomed, whose deferred unique constraint fails the COMMIT
// of a transaction that inserted one id twice (a unique violation that
// must not be taken for the record's).
const conformanceTables = `CREATE TABLE IF NOT EXISTS %[1]s.effects (name text NOT NULL);
CREATE TABLE IF NOT EXISTS %[1]s.doomed (id int UNIQUE DEFERRABLE INITIALLY DEFERRED)`

// plantRecord commits a record of the key from outside the key's lock.
const plantRecord = `INSERT INTO idem_records (scope, key, fingerprint, state, status, body, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, state = excluded.state,
	status = excluded.status, headers = NULL, body = excluded.body,
	created_at = excluded.created_at, expires_at = excluded.expires_at`

// conformanceHarness runs each storetest case in a schema of its own,
// through pgx's stdlib driver: the store's table and the harness's tables
// live there, and the connections' search_path names it. base is copied
// for each store; its Schema is set to the location.
func conformanceHarness(base *sqldb.Config) storetest.Harness {
	var dbs sync.Map // *sqldb.Store → *sql.DB
	dbOf := func(s idem.Store) (*sql.DB, error) {
		if db, ok := dbs.Load(s); ok {
			return db.(*sql.DB), nil
		}
		return nil, fmt.Errorf("store %p is closed", s)
	}
	execTx := func(ctx context.Context, query string, args ...any) error {
		tx, ok := sqldb.TxFrom(ctx)
		if !ok {
			return errors.New("no sqldb transaction in the context")
		}
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	}
	return storetest.Harness{
		NewLocation: func(t testing.TB) string { return pgtest.SchemaName(t) },
		Persistent:  true,
		Open: func(ctx context.Context, location string) (idem.Store, error) {
			db, err := openDB(dbOptions{schema: location, maxConns: 8})
			if err != nil {
				return nil, err
			}
			var cfg sqldb.Config
			if base != nil {
				cfg = *base
			}
			cfg.Schema = location
			s, err := sqldb.New(ctx, db, &cfg)
			if err == nil {
				_, err = db.ExecContext(ctx, fmt.Sprintf(conformanceTables, pgx.Identifier{location}.Sanitize()))
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
			return execTx(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			db, err := dbOf(s)
			var n int
			if err == nil {
				err = db.QueryRowContext(ctx, `SELECT count(*) FROM effects WHERE name = $1`, name).Scan(&n)
			}
			return n, err
		},
		PlantRecord: func(ctx context.Context, s idem.Store, rec *idem.Record) (bool, error) {
			db, err := dbOf(s)
			if err == nil {
				_, err = db.ExecContext(ctx, plantRecord, rec.Scope, rec.Key, rec.Fingerprint, string(rec.State), rec.Result.Status, rec.Result.Body, rec.CreatedAt, rec.ExpiresAt)
			}
			return false, err
		},
		EndTx: func(ctx context.Context, end storetest.TxEnd) error {
			return execTx(ctx, string(end))
		},
		FailCommit: func(ctx context.Context) error {
			return execTx(ctx, `INSERT INTO doomed (id) VALUES (1), (1)`)
		},
	}
}

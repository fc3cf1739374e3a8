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

// conformanceHarness runs each storetest case in a schema of its own: the
// store's table and the harness's tables live there, and the pools'
// search_path names it. base is copied for each store; its Schema is set
// to the location.
func conformanceHarness(base *pgstore.Config) storetest.Harness {
	var pools sync.Map // *pgstore.Store → *pgxpool.Pool
	poolOf := func(s idem.Store) (*pgxpool.Pool, error) {
		if p, ok := pools.Load(s); ok {
			return p.(*pgxpool.Pool), nil
		}
		return nil, fmt.Errorf("store %p is closed", s)
	}
	execTx := func(ctx context.Context, sql string, args ...any) error {
		tx, ok := pgstore.TxFrom(ctx)
		if !ok {
			return errors.New("no pgstore transaction in the context")
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	}
	return storetest.Harness{
		NewLocation: func(t testing.TB) string { return pgtest.SchemaName(t) },
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
				_, err = pool.Exec(ctx, fmt.Sprintf(conformanceTables, pgx.Identifier{location}.Sanitize()))
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
			return execTx(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			p, err := poolOf(s)
			var n int
			if err == nil {
				err = p.QueryRow(ctx, `SELECT count(*) FROM effects WHERE name = $1`, name).Scan(&n)
			}
			return n, err
		},
		PlantRecord: func(ctx context.Context, s idem.Store, rec *idem.Record) (bool, error) {
			p, err := poolOf(s)
			if err == nil {
				_, err = p.Exec(ctx, plantRecord, rec.Scope, rec.Key, rec.Fingerprint, string(rec.State), rec.Result.Status, rec.Result.Body, rec.CreatedAt, rec.ExpiresAt)
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

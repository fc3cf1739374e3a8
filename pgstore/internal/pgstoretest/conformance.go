package pgstoretest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/idemkit/idem/storetest"
)

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

// Conformance runs the storetest suite against the store d opens with cfg,
// each case in a schema of its own: the store's table and the harness's
// tables live there, and the connections' search_path names it.
func Conformance(t *testing.T, d Driver, cfg Config) {
	pgtest.Require(t)
	conformance(t, d, cfg, func(t testing.TB) string { return pgtest.SchemaName(t) },
		func(location string) (Conn, string) { return Conn{SearchPath: location}, location })
}

// ConformanceThroughBouncer runs the suite as Conformance does, through a
// private PgBouncer in pool mode mode (pgtest.BouncerSchema) whose
// database of the case's schema has it as search_path. The DSN asks for
// pgx.QueryExecModeExec: a pool built by the driver is the user's, and
// New refuses one that caches prepared statements behind a pooler.
func ConformanceThroughBouncer(t *testing.T, d Driver, cfg Config, mode string) {
	pgtest.Require(t)
	conformance(t, d, cfg, func(t testing.TB) string {
		_, dsn := pgtest.BouncerSchema(t, mode)
		return dsn + "&default_query_exec_mode=exec"
	}, func(location string) (Conn, string) {
		u, err := url.Parse(location)
		if err != nil {
			panic(err)
		}
		return Conn{DSN: location}, strings.TrimPrefix(u.Path, "/")
	})
}

func conformance(t *testing.T, d Driver, cfg Config, newLocation func(testing.TB) string, conn func(location string) (Conn, string)) {
	var envs sync.Map // idem.Store → *Env
	envOf := func(s idem.Store) (*Env, error) {
		if e, ok := envs.Load(s); ok {
			return e.(*Env), nil
		}
		return nil, fmt.Errorf("store %p is closed", s)
	}
	inWork := func(ctx context.Context, sql string, args ...any) error {
		q, err := d.Tx(ctx, nil)
		if err != nil {
			return err
		}
		return q.Exec(ctx, sql, args...)
	}
	storetest.Run(t, storetest.Harness{
		NewLocation: newLocation,
		Persistent:  true,
		Open: func(ctx context.Context, location string) (idem.Store, error) {
			c := cfg
			cn, schema := conn(location)
			c.Schema = schema
			e, err := d.Open(ctx, t, cn, c)
			if err != nil {
				return nil, err
			}
			if err := e.DB.Exec(ctx, fmt.Sprintf(conformanceTables, pgschema.Quote(schema))); err != nil {
				e.Close()
				return nil, err
			}
			envs.Store(e.Store, e)
			return e.Store, nil
		},
		Close: func(s idem.Store) error {
			if e, ok := envs.LoadAndDelete(s); ok {
				e.(*Env).Close()
			}
			return nil
		},
		Effect: func(ctx context.Context, name string) error {
			return inWork(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			e, err := envOf(s)
			var n int
			if err == nil {
				err = e.DB.QueryRow(ctx, `SELECT count(*) FROM effects WHERE name = $1`, name).Scan(&n)
			}
			return n, err
		},
		PlantRecord: func(ctx context.Context, s idem.Store, rec *idem.Record) (bool, error) {
			e, err := envOf(s)
			if err == nil {
				err = e.DB.Exec(ctx, plantRecord, rec.Scope, rec.Key, rec.Fingerprint, string(rec.State),
					rec.Result.Status, rec.Result.Body, rec.CreatedAt, rec.ExpiresAt)
			}
			return false, err
		},
		EndTx: func(ctx context.Context, end storetest.TxEnd) error {
			return inWork(ctx, string(end))
		},
		FailCommit: func(ctx context.Context) error {
			return inWork(ctx, `INSERT INTO doomed (id) VALUES (1), (1)`)
		},
	})
}

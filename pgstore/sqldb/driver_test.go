package sqldb_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/idemkit/idem/pgstore/internal/pgstoretest"
	"github.com/idemkit/idem/pgstore/sqldb"
)

// TestStore runs the tests sqldb shares with pgstore.
func TestStore(t *testing.T) { pgstoretest.Run(t, driver{}) }

func BenchmarkTransfer(b *testing.B)      { pgstoretest.BenchmarkTransfer(b, driver{}) }
func BenchmarkReplay(b *testing.B)        { pgstoretest.BenchmarkReplay(b, driver{}) }
func BenchmarkStorm(b *testing.B)         { pgstoretest.BenchmarkStorm(b, driver{}) }
func BenchmarkSweep(b *testing.B)         { pgstoretest.BenchmarkSweep(b, driver{}) }
func BenchmarkTransferRatio(b *testing.B) { pgstoretest.BenchmarkTransferRatio(b, driver{}) }
func BenchmarkCost(b *testing.B)          { pgstoretest.BenchmarkCost(b, driver{}) }
func BenchmarkRecords(b *testing.B)       { pgstoretest.BenchmarkRecords(b, driver{}) }

// driver runs the shared tests on sqldb, through pgx's stdlib driver.
type driver struct{}

func (driver) Open(ctx context.Context, t testing.TB, c pgstoretest.Conn, cfg pgstoretest.Config) (*pgstoretest.Env, error) {
	var db *sql.DB
	if !c.Nil {
		var err error
		o := dbOptions{dsn: c.DSN, schema: c.SearchPath, appName: c.AppName, maxConns: cmp.Or(c.MaxConns, 8), runtime: c.Runtime, dial: c.Dial, noPing: c.NoPing}
		if db, err = openDB(o); err != nil {
			return nil, err
		}
		t.Cleanup(func() { db.Close() })
	}
	sc := &sqldb.Config{
		Schema:                   cfg.Schema,
		Table:                    cfg.Table,
		SkipMigrate:              cfg.SkipMigrate,
		ReplayProbe:              cfg.ReplayProbe,
		IdleInTransactionTimeout: cfg.IdleInTransactionTimeout,
	}
	if cfg.ProbeConns > 0 {
		probe, err := openDB(dbOptions{dsn: c.DSN, schema: c.SearchPath, maxConns: cfg.ProbeConns, dial: c.Dial})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { probe.Close() })
		sc.ProbeDB = probe
	}
	s, err := sqldb.New(ctx, db, sc)
	if err != nil {
		return nil, err
	}
	return &pgstoretest.Env{
		Store: s,
		DB:    sqldb.Querier(db),
		InTx: func(ctx context.Context, f func(pgschema.Querier) error) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := f(sqldb.Querier(tx)); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		},
		Hold: func(ctx context.Context) (func(), error) {
			conn, err := db.Conn(ctx)
			if err != nil {
				return nil, err
			}
			return func() { conn.Close() }, nil
		},
		Close: func() { db.Close() },
	}, nil
}

// Tx runs statements in tx's *sql.Tx, or in the one of the work that ctx
// was given to.
func (driver) Tx(ctx context.Context, tx idem.Tx) (pgschema.Querier, error) {
	if tx != nil {
		return sqldb.Querier(tx.Handle().(*sql.Tx)), nil
	}
	if t, ok := sqldb.TxFrom(ctx); ok {
		return sqldb.Querier(t), nil
	}
	return nil, errors.New("no sqldb transaction in the context")
}

func (driver) Transient(err error) bool { return sqldb.Transient(err) }

func (driver) SetLockKey(s pgstoretest.Store, f func(scope, key string) int64) {
	sqldb.SetLockKey(s.(*sqldb.Store), f)
}

// RoundTrips: each statement is a round trip of its own: BEGIN, the begin
// function (the lock and the read in one statement), then the INSERT and
// COMMIT, or a ROLLBACK; with the probe, one statement first, which alone
// answers a replay or a refusal.
func (driver) RoundTrips(probe bool) pgstoretest.RoundTrips {
	if probe {
		return pgstoretest.RoundTrips{First: 5, Replay: 1, InFlight: 1}
	}
	return pgstoretest.RoundTrips{First: 4, Replay: 3, InFlight: 3}
}

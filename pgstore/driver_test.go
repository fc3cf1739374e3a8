package pgstore_test

import (
	"cmp"
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/idemkit/idem/pgstore/internal/pgstoretest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestStore runs the tests pgstore shares with pgstore/sqldb.
func TestStore(t *testing.T) { pgstoretest.Run(t, driver{}) }

func BenchmarkTransfer(b *testing.B)      { pgstoretest.BenchmarkTransfer(b, driver{}) }
func BenchmarkReplay(b *testing.B)        { pgstoretest.BenchmarkReplay(b, driver{}) }
func BenchmarkStorm(b *testing.B)         { pgstoretest.BenchmarkStorm(b, driver{}) }
func BenchmarkSweep(b *testing.B)         { pgstoretest.BenchmarkSweep(b, driver{}) }
func BenchmarkTransferRatio(b *testing.B) { pgstoretest.BenchmarkTransferRatio(b, driver{}) }
func BenchmarkCost(b *testing.B)          { pgstoretest.BenchmarkCost(b, driver{}) }
func BenchmarkRecords(b *testing.B)       { pgstoretest.BenchmarkRecords(b, driver{}) }

// driver runs the shared tests on pgstore, over pgxpool.
type driver struct{}

func (driver) Open(ctx context.Context, t testing.TB, c pgstoretest.Conn, cfg pgstoretest.Config) (*pgstoretest.Env, error) {
	var pool *pgxpool.Pool
	if !c.Nil {
		pc, err := pgxpool.ParseConfig(cmp.Or(c.DSN, pgtest.DSN()))
		if err != nil {
			return nil, err
		}
		rt := pc.ConnConfig.RuntimeParams
		for k, v := range map[string]string{"search_path": c.SearchPath, "application_name": c.AppName} {
			if v != "" {
				rt[k] = v
			}
		}
		for k, v := range c.Runtime {
			rt[k] = v
		}
		if c.Dial != nil {
			pc.ConnConfig.DialFunc = c.Dial
		}
		if c.NoPing {
			pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		}
		pc.MaxConns = int32(cmp.Or(c.MaxConns, 8))
		if pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return nil, err
		}
		t.Cleanup(pool.Close)
	}
	s, err := pgstore.New(ctx, pool, &pgstore.Config{
		Schema:                   cfg.Schema,
		Table:                    cfg.Table,
		SkipMigrate:              cfg.SkipMigrate,
		ReplayProbe:              cfg.ReplayProbe,
		IdleInTransactionTimeout: cfg.IdleInTransactionTimeout,
		ProbeConns:               cfg.ProbeConns,
	})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = s.Close() })
	return &pgstoretest.Env{
		Store: s,
		DB:    pgstore.Querier(pool),
		InTx: func(ctx context.Context, f func(pgschema.Querier) error) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return f(pgstore.Querier(tx)) })
		},
		Hold: func(ctx context.Context) (func(), error) {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return nil, err
			}
			return conn.Release, nil
		},
		Close: func() { _ = s.Close(); pool.Close() },
	}, nil
}

// Tx runs statements in tx's pgx.Tx, or in the one of the work that ctx was
// given to.
func (driver) Tx(ctx context.Context, tx idem.Tx) (pgschema.Querier, error) {
	if tx != nil {
		return pgstore.Querier(tx.Handle().(pgx.Tx)), nil
	}
	if t, ok := pgstore.TxFrom(ctx); ok {
		return pgstore.Querier(t), nil
	}
	return nil, errors.New("no pgstore transaction in the context")
}

func (driver) Transient(err error) bool { return pgstore.Transient(err) }

func (driver) SetLockKey(s pgstoretest.Store, f func(scope, key string) int64) {
	pgstore.SetLockKey(s.(*pgstore.Store), f)
}

// RoundTrips: a batch to begin and one to commit; with the probe, the probe
// first, which alone answers a replay or a refusal.
func (driver) RoundTrips(probe bool) pgstoretest.RoundTrips {
	if probe {
		return pgstoretest.RoundTrips{First: 3, Replay: 1, InFlight: 1}
	}
	return pgstoretest.RoundTrips{First: 2, Replay: 2, InFlight: 2}
}

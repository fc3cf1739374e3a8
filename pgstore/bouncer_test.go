package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/leasetest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgstoretest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Through PgBouncer, in transaction and in session pooling, Open takes the
// URL as a user writes it: it finds the pooler and leaves pgx's statement
// cache, whose named statements collide on the bouncer's shared server
// connections (SQLSTATE 42P05). Without that, the second Open in
// transaction pooling fails. New refuses a pool of the user's that caches
// statements behind a pooler, naming the fix, and accepts it directly.
func TestOpenThroughPgBouncer(t *testing.T) {
	ctx := context.Background()
	for _, mode := range pgtest.BouncerModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			_, dsn := pgtest.BouncerSchema(t, mode)
			for i := range 4 {
				s, err := pgstore.Open(ctx, dsn, nil)
				if err != nil {
					t.Fatalf("Open %d through PgBouncer in %s pooling: %v", i, mode, err)
				}
				if got := s.Pool().Config().ConnConfig.DefaultQueryExecMode; got != pgx.QueryExecModeExec {
					t.Errorf("Open %d: query mode %s, want exec behind the pooler", i, got)
				}
				s.Close()
			}
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if _, err := pgstore.New(ctx, pool, nil); !errors.Is(err, pgstore.ErrPoolerStatementCache) {
				t.Fatalf("New on a caching pool behind PgBouncer: %v, want ErrPoolerStatementCache", err)
			}
		})
	}
	t.Run("direct", func(t *testing.T) {
		_, dsn := pgtest.Schema(t)
		s, err := pgstore.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got := s.Pool().Config().ConnConfig.DefaultQueryExecMode; got != pgx.QueryExecModeCacheStatement {
			t.Errorf("query mode %s directly, want pgx's default cache_statement", got)
		}
	})
}

// The storetest suite through PgBouncer: the key's lock is a
// transaction-scoped advisory lock and the per-transaction settings are
// set_config(…, true), so the suite holds in transaction pooling, where a
// session's state would be another client's.
func TestConformanceThroughPgBouncer(t *testing.T) {
	for _, mode := range pgtest.BouncerModes {
		t.Run(mode, func(t *testing.T) {
			pgstoretest.ConformanceThroughBouncer(t, driver{}, pgstoretest.Config{}, mode)
		})
	}
}

// The leased-mode suite through PgBouncer, each location opened with
// Open on the bouncer's URL as given.
func TestLeasedConformanceThroughPgBouncer(t *testing.T) {
	for _, mode := range pgtest.BouncerModes {
		t.Run(mode, func(t *testing.T) {
			leasetest.Run(t, leasedHarness(func(t testing.TB) string {
				_, dsn := pgtest.BouncerSchema(t, mode)
				return dsn
			}))
		})
	}
}

var _ idem.LeasedStore = (*pgstore.Store)(nil)

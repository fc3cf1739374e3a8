package mysqlstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/mysqlstore"
)

// serializable is dsn with every session of its connections SERIALIZABLE,
// under which InnoDB takes every plain read inside a transaction for a
// locking read.
func serializable(t *testing.T, dsn string) string {
	t.Helper()
	return withParam(t, dsn, "tx_isolation", "'SERIALIZABLE'")
}

// storesOnEveryPath opens one store per way atomic work runs (Open's
// deferred transactions, a *sql.DB of yours, an account without
// routines), each on a database of its own reached through dsnOf.
func storesOnEveryPath(t *testing.T, dsnOf func(dsn string) string) map[string]*mysqlstore.Store {
	t.Helper()
	out := map[string]*mysqlstore.Store{}
	_, dsn := mysqltest.Database(t)
	out["deferred"] = open(t, dsnOf(dsn), nil)

	_, dsn = mysqltest.Database(t)
	out["procedures"] = openNew(t, dsnOf(dsn), nil)

	_, dsn = mysqltest.Database(t)
	out["statements"] = open(t, dsnOf(mysqltest.WithoutRoutines(t, dsn)), nil)
	for path, s := range out {
		if got := mysqlstore.Path(s); got != path {
			t.Fatalf("the store meant for %s runs atomic work by %s", path, got)
		}
		var level string
		if err := s.DB().QueryRow(`SELECT @@SESSION.tx_isolation`).Scan(&level); err != nil {
			t.Fatal(err)
		}
		if level != "SERIALIZABLE" {
			t.Fatalf("%s: the session's isolation is %s, want SERIALIZABLE", path, level)
		}
	}
	return out
}

// Under SERIALIZABLE, two works of different keys open at once both
// commit: Begin's reads of the records table take no shared locks in
// the work's transaction, whose gap locks would make each INSERT of a
// record wait for the other (a deadlock, one work refused).
func TestSerializableNeighboursBothCommit(t *testing.T) {
	mysqltest.Require(t)
	ctx := context.Background()
	for path, s := range storesOnEveryPath(t, func(dsn string) string { return serializable(t, dsn) }) {
		t.Run(path, func(t *testing.T) {
			g := guard(t, s)
			var both sync.WaitGroup
			both.Add(2)
			errs := make(chan error, 2)
			for _, key := range []string{"k1", "k2"} {
				go func() {
					_, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
						both.Done()
						both.Wait() // both keys' Begins are done before either commits
						return idem.Result{Status: 201}, effect(ctx, key)
					})
					errs <- err
				}()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Errorf("a work of its own key: %v", err)
				}
			}
			for _, key := range []string{"k1", "k2"} {
				if n := count(t, s, key); n != 1 {
					t.Errorf("%s: %d effects, want 1", key, n)
				}
			}
		})
	}
}

// Under SERIALIZABLE, Begin never waits on a row lock: a session that
// holds the key's expired record (FOR UPDATE, as the sweeper's DELETE
// does) does not hold Begin up to innodb_lock_wait_timeout.
func TestSerializableBeginDoesNotWaitOnARowLock(t *testing.T) {
	mysqltest.Require(t)
	ctx := context.Background()
	for path, s := range storesOnEveryPath(t, func(dsn string) string { return serializable(t, dsn) }) {
		t.Run(path, func(t *testing.T) {
			now := time.Now().Truncate(time.Microsecond)
			_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx, &idem.CommitParams{Now: now, Record: &idem.Record{Scope: "s", Key: "k", Fingerprint: "fp",
				State: idem.StateCompleted, Result: idem.Result{Status: 201}, CreatedAt: now, ExpiresAt: now.Add(time.Second)}}); err != nil {
				t.Fatal(err)
			}
			holder, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			var n int
			if err := holder.QueryRow(`SELECT COUNT(*) FROM idem_records WHERE scope = 's' AND ` + "`key`" + ` = 'k' FOR UPDATE`).Scan(&n); err != nil || n != 1 {
				t.Fatalf("locking the record: %d rows, %v", n, err)
			}
			bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			rec, tx, err := s.Begin(bctx, &idem.BeginParams{Scope: "s", Key: "k", Now: now.Add(2 * time.Second)})
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Begin waited on the record's row lock: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec != nil || tx == nil {
				t.Fatalf("Begin on an expired record: record %v, tx %v; want a transaction", rec, tx)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

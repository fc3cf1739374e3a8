package transfers

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// migrators is how many ledgers migrate one fresh database at once, and
// rounds how many fresh databases each test tries.
const migrators, rounds = 4, 5

// Replicas started together on a fresh PostgreSQL schema all start: their
// ledger migrations, each on a pool of its own as a process's would be,
// run one at a time under the ledger's advisory lock, and the later ones
// find the tables made. (Unlocked, CREATE TABLE IF NOT EXISTS races in
// the catalog and one fails with a unique violation of pg_type.)
func TestMigrateConcurrentlyOnPostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range rounds {
		schema, dsn := pgtest.Schema(t)
		dbs := make([]*Database, migrators)
		for i := range dbs {
			store, err := pgstore.Open(ctx, dsn, &pgstore.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			dbs[i] = Postgres(store)
		}
		migrateAtOnce(ctx, t, round, dbs)
	}
}

// The same on a fresh SQLite file: SQLite's write lock, taken when each
// migration's transaction begins (BEGIN IMMEDIATE, waiting out the busy
// timeout), lets one migrate at a time, so that no check for a missing
// column is overtaken by another migration adding it.
func TestMigrateConcurrentlyOnSQLite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range rounds {
		store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "bank.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		dbs := make([]*Database, migrators)
		for i := range dbs {
			dbs[i] = SQLite(store)
		}
		migrateAtOnce(ctx, t, round, dbs)
	}
}

// migrateAtOnce migrates every ledger of dbs, all released at once, and
// fails the test if any migration fails or the ledger is not usable after.
func migrateAtOnce(ctx context.Context, t *testing.T, round int, dbs []*Database) {
	t.Helper()
	start := make(chan struct{})
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		wg.Go(func() {
			<-start
			errs[i] = db.migrate(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("round %d: migration %d of %d: %v", round, i+1, len(dbs), err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Migrated means usable: a row in every table the ledger made.
	db := dbs[0]
	for _, q := range []string{
		`INSERT INTO accounts (id, balance) VALUES ('alice', 10), ('bob', 0)`,
		`INSERT INTO transfers (src, dst, amount, created_at, message_id, batch_id, row_id) VALUES ('alice', 'bob', 1, 1, 'm', 'b', 'r')`,
		`INSERT INTO payouts (account, amount, state, created_at, op_key) VALUES ('alice', 1, 'pending', 1, 'op')`,
	} {
		if _, err := db.pool.exec(ctx, q); err != nil {
			t.Fatalf("round %d: after the migrations: %s: %v", round, q, err)
		}
	}
}

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

// ledgers opens an empty SQLite and an empty PostgreSQL ledger (not
// migrated), with db.pool's exec for the test's own statements.
func ledgers(t *testing.T) map[string]*Database {
	t.Helper()
	ctx := context.Background()
	lite, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "bank.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	schema, dsn := pgtest.Schema(t)
	pg, err := pgstore.Open(ctx, dsn, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	return map[string]*Database{"SQLite": SQLite(lite), "Postgres": Postgres(pg)}
}

// testKeys are the keys of a test's payout named op.
func testKeys(op string) payoutKeys {
	return payoutKeys{op: op, legacyOp: op + ".legacy", charge: op + ".charge"}
}

// Two executions of one payout's debit racing in two transactions (a
// holder paused past its lease, and its successor) debit the account
// once: the second finds the first's payout by its op_key, or its insert
// conflicts on the unique op_key and its transaction, debit included,
// rolls back.
func TestDebitOnceByOpKey(t *testing.T) {
	t.Parallel()
	for name, db := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := New(ctx, db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.pool.exec(ctx, `INSERT INTO accounts (id, balance) VALUES ('alice', 1000)`); err != nil {
				t.Fatal(err)
			}
			in := payoutRequest{Account: "alice", Amount: 300}
			first, err := db.begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id, err := s.debit(ctx, first, in, testKeys("op-1"))
			if err != nil {
				t.Fatal(err)
			}
			// The second blocks (on SQLite's write lock, or PostgreSQL's
			// row lock) until the first commits.
			type result struct {
				id  int64
				err error
			}
			second := make(chan result, 1)
			var wg sync.WaitGroup
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				tx, err := db.begin(ctx)
				if err != nil {
					second <- result{0, err}
					return
				}
				id, err := s.debit(ctx, tx, in, testKeys("op-1"))
				if err == nil {
					err = tx.commit(ctx)
				} else {
					_ = tx.rollback(ctx)
				}
				second <- result{id, err}
			})
			time.Sleep(100 * time.Millisecond) // let it reach the lock
			if err := first.commit(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			r := <-second
			if r.err == nil && r.id != id {
				t.Fatalf("the second debit made payout %d, want the first's %d or an error", r.id, id)
			}
			var balance int64
			var payouts int
			if err := db.pool.queryRow(ctx, `SELECT balance FROM accounts WHERE id = 'alice'`).Scan(&balance); err != nil {
				t.Fatal(err)
			}
			if err := db.pool.queryRow(ctx, `SELECT count(*) FROM payouts`).Scan(&payouts); err != nil {
				t.Fatal(err)
			}
			if balance != 700 || payouts != 1 {
				t.Fatalf("balance %d and %d payouts (second: %d, %v), want 700 and 1", balance, payouts, r.id, r.err)
			}
			t.Logf("the second debit: id %d, err %v", r.id, r.err)
		})
	}
}

// A ledger created before payouts.op_key, charge_key and seen_at gets the
// columns and their indexes when the service starts, and keeps its
// payouts.
func TestMigratePayoutOpKey(t *testing.T) {
	t.Parallel()
	old := map[string]string{
		"SQLite": `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));
			CREATE TABLE payouts (id INTEGER PRIMARY KEY AUTOINCREMENT, account TEXT NOT NULL REFERENCES accounts (id),
				amount INTEGER NOT NULL CHECK (amount > 0), state TEXT NOT NULL, provider_charge_id TEXT, created_at INTEGER NOT NULL);
			INSERT INTO accounts VALUES ('alice', 1000);
			INSERT INTO payouts (account, amount, state, created_at) VALUES ('alice', 1, 'completed', 1), ('alice', 2, 'completed', 2)`,
		"Postgres": `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL CHECK (balance >= 0));
			CREATE TABLE payouts (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, account TEXT NOT NULL REFERENCES accounts (id),
				amount BIGINT NOT NULL CHECK (amount > 0), state TEXT NOT NULL, provider_charge_id TEXT, created_at BIGINT NOT NULL);
			INSERT INTO accounts VALUES ('alice', 1000);
			INSERT INTO payouts (account, amount, state, created_at) VALUES ('alice', 1, 'completed', 1), ('alice', 2, 'completed', 2)`,
	}
	for name, db := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if _, err := db.pool.exec(ctx, old[name]); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second start finds it done
				if _, err := New(ctx, db, nil); err != nil {
					t.Fatal(err)
				}
			}
			var n int
			if err := db.pool.queryRow(ctx, `SELECT count(*) FROM payouts WHERE op_key IS NULL`).Scan(&n); err != nil || n != 2 {
				t.Fatalf("%d old payouts without an op_key (%v), want 2", n, err)
			}
			ins := `INSERT INTO payouts (account, amount, state, created_at, op_key, charge_key, seen_at) VALUES ('alice', 3, 'pending', 3, 'k', 'ck', 3)`
			if _, err := db.pool.exec(ctx, ins); err != nil {
				t.Fatal(err)
			}
			if _, err := db.pool.exec(ctx, ins); err == nil {
				t.Fatal("a second payout with op_key k was inserted, want a unique violation")
			}
		})
	}
}

// A provider that answers a new payout with a charge that already pays
// another one (an old charge replayed for a key reused after its record
// expired) does not complete it: it stays pending, for a human, and the
// first payout keeps its charge.
func TestCompleteRefusesAChargeOfAnotherPayout(t *testing.T) {
	t.Parallel()
	for name, db := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := New(ctx, db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.pool.exec(ctx, `INSERT INTO accounts (id, balance) VALUES ('alice', 1000)`); err != nil {
				t.Fatal(err)
			}
			in := payoutRequest{Account: "alice", Amount: 100}
			ids := make([]int64, 2)
			for i, op := range []string{"op-1", "op-2"} {
				tx, err := db.begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ids[i], err = s.debit(ctx, tx, in, testKeys(op)); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					if _, err := s.completePayout(ctx, tx, ids[0], "ch_1"); err != nil {
						t.Fatal(err)
					}
				}
				if err := tx.commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := db.begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.rollback(ctx)
			if _, err := s.completePayout(ctx, tx, ids[1], "ch_1"); err == nil {
				t.Fatal("a second payout was completed with the first one's charge")
			}
			var state string
			if err := tx.queryRow(ctx, `SELECT state FROM payouts WHERE id = $1`, ids[1]).Scan(&state); err != nil || state != PayoutPending {
				t.Fatalf("second payout: %q (%v), want pending", state, err)
			}
		})
	}
}

// A payout debited while the op_key held the record's creation time (the
// legacy key) is found by it: its re-run debits nothing, however old.
func TestDebitFindsTheLegacyOpKey(t *testing.T) {
	t.Parallel()
	for name, db := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := New(ctx, db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.pool.exec(ctx, `INSERT INTO accounts (id, balance) VALUES ('alice', 900)`); err != nil {
				t.Fatal(err)
			}
			keys := testKeys("op-1")
			if _, err := db.pool.exec(ctx, `INSERT INTO payouts (account, amount, state, created_at, op_key) VALUES ('alice', 100, 'pending', 1, $1)`, keys.legacyOp); err != nil {
				t.Fatal(err)
			}
			tx, err := db.begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id, err := s.debit(ctx, tx, payoutRequest{Account: "alice", Amount: 100}, keys)
			if err == nil {
				err = tx.commit(ctx)
			} else {
				_ = tx.rollback(ctx)
			}
			var balance int64
			if err := db.pool.queryRow(ctx, `SELECT balance FROM accounts WHERE id = 'alice'`).Scan(&balance); err != nil {
				t.Fatal(err)
			}
			if err != nil || id != 1 || balance != 900 {
				t.Fatalf("debit: payout %d, %v, balance %d; want the legacy payout 1 and no debit (900)", id, err, balance)
			}
		})
	}
}

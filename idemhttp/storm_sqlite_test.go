package idemhttp_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// The duplicate storm against the embedded default store, whose effect is
// a row written through the *sql.Tx that sqlitestore.TxFrom returns.
func TestStormSQLite(t *testing.T) {
	t.Parallel()
	store, g := sqliteGuard(t, `CREATE TABLE transfers (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)`)
	testStorm(t, stormTarget{
		guard: g,
		effect: func(ctx context.Context) error {
			tx, ok := sqlitestore.TxFrom(ctx)
			if !ok {
				return errors.New("no sqlitestore transaction in the request context")
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO transfers (amount) VALUES (10)`)
			return err
		},
		effects: func(t *testing.T) int {
			var n int
			if err := store.DB().QueryRowContext(context.Background(), `SELECT count(*) FROM transfers`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
	})
}

// sqliteGuard opens a SQLite store in a temporary directory, runs ddl on
// it (the effect's table) and returns it with a Guard over it.
func sqliteGuard(t *testing.T, ddl string) (*sqlitestore.Store, *idem.Guard) {
	t.Helper()
	store, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.DB().ExecContext(t.Context(), ddl); err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	return store, g
}

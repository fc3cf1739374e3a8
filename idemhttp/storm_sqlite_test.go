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
	ctx := t.Context()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if _, err := store.DB().ExecContext(ctx, `CREATE TABLE transfers (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
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

package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/pgstore/sqldb"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// setup returns a store in a fresh schema, which is the search_path of its
// database handle and holds an effects table.
func setup(t *testing.T) *sqldb.Store {
	t.Helper()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	db := newDB(t, dbOptions{schema: schema, maxConns: 4})
	s, err := sqldb.New(context.Background(), db, &sqldb.Config{Schema: schema})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := db.Exec(`CREATE TABLE effects (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWorkThatEndsTheTxIsReported(t *testing.T) {
	// The *sql.Tx of TxFrom belongs to the Guard. A work that commits it
	// itself gets an error that says so, matching ErrUnavailable and
	// sql.ErrTxDone, and not transient: retrying will not cure it.
	t.Parallel()
	g, _ := idem.New(setup(t), nil)
	_, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqldb.TxFrom(ctx)
		return idem.Result{Status: 200}, tx.Commit()
	})
	if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, sql.ErrTxDone) || sqldb.Transient(err) {
		t.Errorf("Do with a work that committed the tx: %v, want a permanent ErrUnavailable wrapping sql.ErrTxDone", err)
	}
}

func TestTxFrom(t *testing.T) {
	t.Parallel()
	g, _ := idem.New(setup(t), nil)
	var kept *sql.Tx
	_, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		tx, ok := sqldb.TxFrom(ctx)
		if !ok || tx == nil {
			return idem.Result{}, errors.New("TxFrom in the work: no transaction")
		}
		kept = tx
		_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('kept')`)
		return idem.Result{Status: 200}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Exec(`SELECT 1`); !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("Exec after Do: %v, want sql.ErrTxDone", err)
	}
	if _, ok := sqldb.TxFrom(context.Background()); ok {
		t.Error("TxFrom(empty context) = ok")
	}
	// The context of a work that another store's Guard runs carries that
	// store's transaction.
	other, _ := idem.New(memstore.New(), nil)
	if _, _, err := other.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		if _, ok := sqldb.TxFrom(ctx); ok {
			t.Error("TxFrom(another store's transaction) = ok")
		}
		return idem.Result{Status: 200}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestTransient(t *testing.T) {
	// What sqldb adds to the classification both stores share (run by
	// TestStore/Transient): database/sql's own errors.
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"ConnDone", sql.ErrConnDone, true},
		{"TxEndedByTheWork", fmt.Errorf("commit: %w", sql.ErrTxDone), false},
		{"TxEndedByADeadline", fmt.Errorf("%w: %w", context.DeadlineExceeded, sql.ErrTxDone), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := sqldb.Transient(tt.err); got != tt.want {
				t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestProbeDBIsASecondHandle(t *testing.T) {
	// Probing on db itself would wait for the very connections it is
	// meant to do without.
	t.Parallel()
	db, err := sql.Open("pgx", "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = sqldb.New(context.Background(), db, &sqldb.Config{Schema: "s", SkipMigrate: true, ProbeDB: db})
	if err == nil || !strings.Contains(err.Error(), "Config.ProbeDB") {
		t.Errorf("New with ProbeDB = db: %v, want an error naming Config.ProbeDB", err)
	}
}

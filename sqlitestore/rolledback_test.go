package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// counts returns the effects and records in the store's database.
func counts(t *testing.T, s *sqlitestore.Store) (effects, records int) {
	t.Helper()
	if err := s.DB().QueryRow(`SELECT count(*) FROM effects`).Scan(&effects); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().QueryRow(`SELECT count(*) FROM idem_records`).Scan(&records); err != nil {
		t.Fatal(err)
	}
	return effects, records
}

func openForRollback(t *testing.T) (*sqlitestore.Store, *idem.Guard) {
	t.Helper()
	st, err := openWithEffects(context.Background(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*sqlitestore.Store)
	t.Cleanup(func() { s.Close() })
	if _, err := s.DB().Exec(`CREATE TABLE audit (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, g
}

// E1 with a caller that gives up mid-statement: the interrupt makes SQLite
// roll back; a work that ignores the error must not leave a record without
// its effect. Whether the cancel lands before or inside the statement, the
// effect and the record are both there or both absent.
func TestInterruptedStatementNeverRecordsAlone(t *testing.T) {
	t.Parallel()
	s, g := openForRollback(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqlitestore.TxFrom(ctx)
		if _, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('e')`); err != nil {
			return idem.Result{}, err
		}
		time.AfterFunc(20*time.Millisecond, cancel)
		// A best-effort write that runs for seconds, interrupted by the
		// cancel; its error is ignored.
		_, _ = tx.ExecContext(ctx, `INSERT INTO audit WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 100000000) SELECT x FROM c`)
		return idem.Result{Status: 201}, nil
	})
	e, r := counts(t, s)
	if e != r {
		t.Fatalf("effects=%d records=%d (Do: %v): the record and its effect must commit together", e, r, err)
	}
}

// A work that leaves the rows of a write statement open (INSERT …
// RETURNING, not all read) still commits: the savepoint check must not
// mistake "statements in progress" for a transaction that is gone.
func TestOpenRowsOfAWriteDoNotFailTheCommit(t *testing.T) {
	t.Parallel()
	s, g := openForRollback(t)
	_, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqlitestore.TxFrom(ctx)
		rows, err := tx.QueryContext(ctx, `INSERT INTO effects (name) VALUES ('a'), ('b') RETURNING name`)
		if err != nil {
			return idem.Result{}, err
		}
		rows.Next() // one row read, the statement still in progress
		return idem.Result{Status: 201}, nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if e, r := counts(t, s); e != 2 || r != 1 {
		t.Errorf("effects=%d records=%d, want 2 and 1", e, r)
	}
}

package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/mysqlstore"
)

// InnoDB rolls back the whole transaction of a deadlock's victim, and the
// session is in autocommit again: a statement the work sent after the
// deadlock committed on its own, outside the record's transaction, and
// the client's retry ran it a second time. On Open's connections, every
// statement of the aborted transaction is refused until it ends.
func TestStatementAfterADeadlockIsRefused(t *testing.T) {
	mysqltest.Require(t)
	ctx := context.Background()
	for _, path := range []string{"deferred", "statements"} {
		t.Run(path, func(t *testing.T) {
			_, dsn := mysqltest.Database(t)
			if path == "statements" {
				dsn = mysqltest.WithoutRoutines(t, dsn)
			}
			s := open(t, dsn, nil)
			if got := mysqlstore.Path(s); got != path {
				t.Fatalf("the store runs %s, want %s", got, path)
			}
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, q := range []string{
				"CREATE TABLE rows5 (id INT PRIMARY KEY, v INT) ENGINE = InnoDB",
				"INSERT INTO rows5 VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)",
				"CREATE TABLE stray (id INT PRIMARY KEY) ENGINE = InnoDB",
			} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			now := time.Now()
			_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "dl", Now: now})
			if err != nil || tx == nil {
				t.Fatalf("Begin: %v", err)
			}
			w := tx.Handle().(*sql.Tx)
			if _, err := w.Exec("UPDATE rows5 SET v = v + 1 WHERE id = 1"); err != nil {
				t.Fatal(err)
			}
			// Another transaction holds rows 2 to 5 and waits for row
			// 1; the work then asks for row 2: a deadlock, and InnoDB
			// rolls back the transaction that changed fewer rows, the
			// work's.
			other, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for id := 2; id <= 5; id++ {
				if _, err := other.Exec("UPDATE rows5 SET v = v + 1 WHERE id = ?", id); err != nil {
					t.Fatal(err)
				}
			}
			otherErr := make(chan error, 1)
			go func() { _, err := other.Exec("UPDATE rows5 SET v = v + 1 WHERE id = 1"); otherErr <- err }()
			time.Sleep(300 * time.Millisecond)
			_, workErr := w.Exec("UPDATE rows5 SET v = v + 1 WHERE id = 2")
			if oerr := <-otherErr; oerr != nil {
				_ = other.Rollback()
				_ = tx.Rollback(ctx)
				t.Fatalf("InnoDB chose the other transaction as the victim (%v), not the work's", oerr)
			}
			if err := other.Commit(); err != nil {
				t.Fatal(err)
			}
			if workErr == nil {
				t.Fatal("no deadlock")
			}
			// A work that retries after the deadlock, in the same
			// transaction.
			_, err = w.Exec("INSERT INTO stray VALUES (1)")
			if err == nil {
				t.Error("a statement after the deadlock ran")
			}
			_, err = w.Exec("INSERT INTO stray VALUES (?)", 2) // through a prepared statement
			if err == nil {
				t.Error("a prepared statement after the deadlock ran")
			}
			cerr := tx.Commit(ctx, &idem.CommitParams{Now: now, Record: &idem.Record{Scope: "s", Key: "dl", Fingerprint: "f", State: idem.StateCompleted,
				Result: idem.Result{Status: 201, Body: []byte("x")}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}})
			if cerr == nil {
				t.Error("Commit after a deadlock succeeded")
			}
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM stray").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d stray rows committed outside the record's transaction", n)
			}
			if rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "dl"}); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("Lookup: %+v, %v; want no record", rec, err)
			}
			// The connection is usable again: the next key runs.
			_, tx2, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "next", Now: now})
			if err != nil || tx2 == nil {
				t.Fatalf("Begin after: %v", err)
			}
			if _, err := tx2.Handle().(*sql.Tx).Exec("INSERT INTO stray VALUES (3)"); err != nil {
				t.Fatal(err)
			}
			if err := tx2.Commit(ctx, &idem.CommitParams{Now: now, Record: &idem.Record{Scope: "s", Key: "next", Fingerprint: "f", State: idem.StateCompleted,
				Result: idem.Result{Status: 201}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}}); err != nil {
				t.Fatalf("Commit of the next key: %v", err)
			}
		})
	}
}

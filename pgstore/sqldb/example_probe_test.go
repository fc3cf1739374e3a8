package sqldb_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/sqldb"
)

// A pool whose every connection is held by a slow work still answers the
// retry of that work's key at once, from the second handle of
// Config.ProbeDB, instead of waiting for the work to end. The bound on a
// pause between two statements of a work is set to a minute.
func ExampleConfig_probeDB() {
	dsn := os.Getenv("IDEM_PG_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // every work holds a connection until it ends
	probes, err := sql.Open("pgx", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer probes.Close()
	probes.SetMaxOpenConns(2)

	schema := "sqldb_example_" + rand.Text()[:8]
	defer db.Exec(`DROP SCHEMA "` + schema + `" CASCADE`)
	store, err := sqldb.New(ctx, db, &sqldb.Config{
		Schema:                   schema,
		ProbeDB:                  probes,
		IdleInTransactionTimeout: time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, nil)
	if err != nil {
		log.Fatal(err)
	}

	req := idem.Request{Scope: "alice", Key: "transfer-1", Fingerprint: "POST /transfers {amount:100}"}
	working, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, _, err := guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			close(working)
			<-finish // a slow downstream call, say
			return idem.Result{Status: 201}, nil
		})
		done <- err
	}()
	<-working
	_, _, err = guard.Do(ctx, req, func(context.Context) (idem.Result, error) {
		return idem.Result{Status: 201}, nil
	})
	fmt.Println("retry while the work runs:", errors.Is(err, idem.ErrInFlight))
	close(finish)
	fmt.Println("the work:", <-done)
	// Output:
	// retry while the work runs: true
	// the work: <nil>
}

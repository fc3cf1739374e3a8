package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A transfer whose retry, with the same key, replays the first answer
// instead of moving the money twice. The example needs a server: it prints
// nothing when IDEM_PG_DSN is not set.
func Example() {
	dsn := os.Getenv("IDEM_PG_DSN")
	if dsn == "" {
		return
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(ctx, pool, &pgstore.Config{Table: "example_idem_records"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS example_ledger (key text, amount bigint)`); err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, nil)
	if err != nil {
		log.Fatal(err)
	}
	req := idem.Request{Scope: "alice", Key: fmt.Sprint("transfer-", os.Getpid()), Fingerprint: "POST /transfers {amount:100}"}
	for attempt := range 2 {
		res, replayed, err := guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			tx, _ := pgstore.TxFrom(ctx)
			if _, err := tx.Exec(ctx, `INSERT INTO example_ledger VALUES ($1, 100)`, req.Key); err != nil {
				return idem.Result{}, err
			}
			return idem.Result{Status: 201, Body: []byte(`{"status":"done"}`)}, nil
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(attempt, res.Status, string(res.Body), replayed)
	}
}

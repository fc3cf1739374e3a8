package sqldb_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"log"
	"os"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/sqldb"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver; lib/pq works too
)

// A transfer written with database/sql whose retry, with the same key,
// replays the first answer instead of moving the money twice.
func Example() {
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

	// The example's own schema, dropped at the end. sqldb.New creates it
	// with the records table.
	schema := "sqldb_example_" + rand.Text()[:8]
	defer db.Exec(`DROP SCHEMA "` + schema + `" CASCADE`)
	store, err := sqldb.New(ctx, db, &sqldb.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	ledger := `"` + schema + `".ledger`
	if _, err := db.Exec(`CREATE TABLE ` + ledger + ` (key text, amount bigint)`); err != nil {
		log.Fatal(err)
	}
	guard, err := idem.New(store, nil)
	if err != nil {
		log.Fatal(err)
	}

	req := idem.Request{Scope: "alice", Key: "transfer-1", Fingerprint: "POST /transfers {amount:100}"}
	for attempt := range 2 {
		res, replayed, err := guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			tx, _ := sqldb.TxFrom(ctx)
			if _, err := tx.ExecContext(ctx, `INSERT INTO `+ledger+` VALUES ($1, 100)`, req.Key); err != nil {
				return idem.Result{}, err
			}
			return idem.Result{Status: 201, Body: []byte(`{"status":"done"}`)}, nil
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(attempt, res.Status, string(res.Body), replayed)
	}
	var transfers int
	if err := db.QueryRow(`SELECT count(*) FROM ` + ledger).Scan(&transfers); err != nil {
		log.Fatal(err)
	}
	fmt.Println("transfers:", transfers)
	// Output:
	// 0 201 {"status":"done"} false
	// 1 201 {"status":"done"} true
	// transfers: 1
}

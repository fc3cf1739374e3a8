package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// A tool reads the records of a database that a server is writing: a
// read-only open takes no lock and changes nothing.
func ExampleConfig_readOnly() {
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "idem.db")
	ctx := context.Background()

	// The server: the one process that writes the file.
	server, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer server.Close()
	guard, _ := idem.New(server, nil)
	_, _, err = guard.Do(ctx, idem.Request{Scope: "alice", Key: "order-1"}, func(ctx context.Context) (idem.Result, error) {
		return idem.Result{Status: 201, Body: []byte(`{"id":1}`)}, nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// The tool, meanwhile (idem inspect).
	tool, err := sqlitestore.Open(ctx, path, &sqlitestore.Config{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer tool.Close()
	rec, err := tool.Lookup(ctx, &idem.LookupParams{Scope: "alice", Key: "order-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Result.Status, string(rec.Result.Body))
	_, _, err = tool.Begin(ctx, &idem.BeginParams{Scope: "alice", Key: "order-2"})
	fmt.Println(errors.Is(err, sqlitestore.ErrReadOnly))
	// Output:
	// 201 {"id":1}
	// true
}

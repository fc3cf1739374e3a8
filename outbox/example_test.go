package outbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/sqlitestore"
)

// printer is a Publisher that prints what it is given and confirms it.
type printer struct{}

func (printer) Publish(_ context.Context, e outbox.Envelope) error {
	fmt.Printf("publish %s %s (id is ID(scope, key, name): %v)\n", e.Subject, e.Body, e.ID == outbox.ID("transfers", "key-1", "created"))
	return nil
}

// Stage an event with the effect of Guard.Do's work, and relay it once
// committed.
func Example() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	g, _ := idem.New(store, nil)

	for range 2 { // the retry is a replay: it stages nothing
		_, _, err = g.Do(ctx, idem.Request{Scope: "transfers", Key: "key-1"}, func(ctx context.Context) (idem.Result, error) {
			// … write the transfer through sqlitestore.TxFrom(ctx) …
			err := outbox.Stage(ctx, outbox.Message{Name: "created", Subject: "transfers.created", Body: []byte(`{"id":"t1"}`)})
			return idem.Result{Status: 201}, err
		})
		if err != nil {
			panic(err)
		}
	}

	relay := outbox.NewRelay(store.Outbox(), printer{}, nil)
	n, err := relay.RunOnce(ctx) // Run loops until ctx is done
	fmt.Println(n, err, relay.Stats().Published)

	err = outbox.Stage(ctx, outbox.Message{Name: "outside"})
	fmt.Println(err != nil)
	// Output:
	// publish transfers.created {"id":"t1"} (id is ID(scope, key, name): true)
	// 1 <nil> 1
	// true
}

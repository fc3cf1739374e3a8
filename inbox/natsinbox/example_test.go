package natsinbox_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A consumer that applies each transfer command once, on SQLite, until
// SIGTERM.
func ExampleConsume() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cons, err := js.CreateOrUpdateConsumer(ctx, "TRANSFERS", jetstream.ConsumerConfig{
		Durable: "bank", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1,
	})
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlitestore.Open(ctx, "bank.db", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ib, err := inbox.New(store, &inbox.Config{Name: "bank"})
	if err != nil {
		log.Fatal(err)
	}
	err = natsinbox.Consume(ctx, cons, ib, func(ctx context.Context, m *inbox.Message) error {
		tx, _ := sqlitestore.TxFrom(ctx) // the effect commits with m.ID
		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = 'bob'`)
		return err
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
}

// A producer publishes with the key of the intent, made once when the user
// confirmed, and retries with the same key: the stream drops a copy within
// its duplicate window, the consumer's inbox any later one.
func ExamplePublish() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	key := "transfer-2f1c7c9e" // stored with the intent before the first attempt
	body := []byte(`{"from":"alice","to":"bob","amount":500}`)
	for {
		ack, err := natsinbox.Publish(context.Background(), js, "transfers", body, key)
		if err == nil {
			log.Printf("stored as %d (a retry's copy: %v)", ack.Sequence, ack.Duplicate)
			return
		}
		log.Printf("publish: %v; retrying with the same key", err)
		time.Sleep(time.Second)
	}
}

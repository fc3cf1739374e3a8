// Command natsconsumer moves money with a NATS JetStream consumer and the
// inbox on SQLite: it publishes transfers, some of them twice, consumes
// them, and prints the balances. Each transfer takes effect once.
//
//	go run ./examples/natsconsumer   # NATS with JetStream at $NATS_URL, or nats://127.0.0.1:4222
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := os.Getenv("NATS_URL")
	if url == "" {
		url = nats.DefaultURL
	}
	if err := run(context.Background(), url, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "natsconsumer:", err)
		os.Exit(1)
	}
}

type transfer struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// move applies one transfer in the inbox's transaction; a transfer that
// can never succeed is refused (settled, not redelivered).
func move(ctx context.Context, m *inbox.Message) error {
	var t transfer
	if err := json.Unmarshal(m.Body, &t); err != nil || t.Amount <= 0 {
		return inbox.Refuse(fmt.Errorf("not a transfer: %s", m.Body))
	}
	tx, _ := sqlitestore.TxFrom(ctx)
	res, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2 AND balance >= $1`, t.Amount, t.From)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return inbox.Refuse(fmt.Errorf("%s cannot pay %d", t.From, t.Amount))
	}
	_, err = tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, t.Amount, t.To)
	return err
}

func run(ctx context.Context, url string, out io.Writer) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// A stream of our own, with a 1 s duplicate window to show both
	// windows at work.
	name := fmt.Sprintf("NATSCONSUMER_%d", time.Now().UnixNano())
	subject := name + ".transfers"
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Duplicates: time.Second})
	if err != nil {
		return err
	}
	defer js.DeleteStream(context.WithoutCancel(ctx), name)
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "bank", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "natsconsumer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "bank.db"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL);
		INSERT INTO accounts VALUES ('alice', 100), ('bob', 0);`); err != nil {
		return err
	}
	var applied, duplicate atomic.Int64
	ib, err := inbox.New(store, &inbox.Config{Name: "bank", Observer: func(e inbox.Event) {
		switch e.Outcome {
		case inbox.Applied:
			applied.Add(1)
		case inbox.Duplicate:
			duplicate.Add(1)
		}
	}})
	if err != nil {
		return err
	}

	publish := func(key, from, to string, amount int64) bool {
		body, _ := json.Marshal(transfer{from, to, amount})
		ack, err := natsinbox.Publish(ctx, js, subject, body, key)
		if err != nil {
			fmt.Fprintf(out, "publish %s: %v\n", key, err)
			return false
		}
		return ack.Duplicate
	}
	publish("t-1", "alice", "bob", 30)
	publish("t-2", "alice", "bob", 20)
	publish("t-3", "bob", "alice", 5)
	fmt.Fprintf(out, "t-2 published again at once: dropped by the stream: %v\n", publish("t-2", "alice", "bob", 20))
	time.Sleep(1500 * time.Millisecond) // past the stream's 1 s window
	for i := 0; publish("t-3", "bob", "alice", 5) && i < 20; i++ {
		time.Sleep(250 * time.Millisecond) // the stream still remembers t-3
	}
	fmt.Fprintln(out, "t-3 published again after the window: stored again; the inbox will drop it")

	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- natsinbox.Consume(cctx, cons, ib, move, nil) }()
	for deadline := time.Now().Add(30 * time.Second); applied.Load()+duplicate.Load() < 4 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		return err
	}

	var alice, bob int64
	if err := store.DB().QueryRowContext(ctx, `SELECT (SELECT balance FROM accounts WHERE id = 'alice'), (SELECT balance FROM accounts WHERE id = 'bob')`).Scan(&alice, &bob); err != nil {
		return err
	}
	fmt.Fprintf(out, "applied %d, duplicates dropped by the inbox %d; balances: alice=%d bob=%d\n", applied.Load(), duplicate.Load(), alice, bob)
	if applied.Load() != 3 || duplicate.Load() != 1 || alice != 55 || bob != 45 {
		return errors.New("the transfers did not take effect exactly once")
	}
	return nil
}

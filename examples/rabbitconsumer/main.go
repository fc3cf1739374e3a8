// Command rabbitconsumer moves money from RabbitMQ messages with the inbox
// on SQLite. It publishes transfers with publisher confirms, two of them
// twice (as a producer retries after a lost confirm), consumes them, and
// prints the balances: each transfer applied once, an overdraft refused.
//
//	go run ./examples/rabbitconsumer [amqp://guest:guest@127.0.0.1:5672/]
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/amqpinbox"
	"github.com/idemkit/idem/sqlitestore"
	amqp "github.com/rabbitmq/amqp091-go"
)

type transfer struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

func main() {
	url := "amqp://guest:guest@127.0.0.1:5672/"
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	if err := run(context.Background(), url, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rabbitconsumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "rabbitconsumer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "bank.db"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, `
		CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL CHECK (balance >= 0));
		INSERT INTO accounts VALUES ('alice', 100), ('bob', 0), ('carol', 0);`); err != nil {
		return err
	}

	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	queue := fmt.Sprintf("rabbitconsumer-%d", time.Now().UnixNano())
	// A queue of its own, gone a minute after its last use.
	if _, err := amqpinbox.DeclareQueue(conn, queue, amqp.Table{"x-expires": 60000}); err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.QueueDelete(queue, false, false, false)

	// The producer: one id per intent, reused by its retries.
	sends := []struct {
		id string
		t  transfer
	}{
		{"t1", transfer{"alice", "bob", 30}}, {"t2", transfer{"alice", "carol", 20}}, {"t3", transfer{"bob", "carol", 10}},
		{"t4", transfer{"carol", "alice", 500}}, {"t1", transfer{"alice", "bob", 30}}, {"t3", transfer{"bob", "carol", 10}},
	}
	for _, s := range sends {
		body, _ := json.Marshal(s.t)
		if err := amqpinbox.Publish(ctx, ch, "", queue, amqp.Publishing{ContentType: "application/json", Body: body}, s.id); err != nil {
			return err
		}
	}

	// The consumer: the transfer and the message id commit together.
	var settled atomic.Int32
	done := make(chan struct{})
	counts := map[inbox.Outcome]int{}
	ib, err := inbox.New(store, &inbox.Config{Name: "bank", Observer: func(e inbox.Event) {
		counts[e.Outcome]++ // one delivery at a time: Concurrency is 1
		if e.Outcome.Settled() && settled.Add(1) == int32(len(sends)) {
			close(done)
		}
	}})
	if err != nil {
		return err
	}
	c, err := amqpinbox.New(ib, apply, nil)
	if err != nil {
		return err
	}
	cctx, stop := context.WithTimeout(ctx, time.Minute)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(cctx, url, queue) }()
	select {
	case <-done:
	case <-cctx.Done():
	}
	stop()
	if err := <-ran; err != nil || settled.Load() != int32(len(sends)) {
		return fmt.Errorf("the messages were not all consumed within a minute (%v)", err)
	}

	var balances string
	if err := store.DB().QueryRowContext(ctx, `SELECT group_concat(id || ': ' || balance, char(10)) FROM (SELECT * FROM accounts ORDER BY id)`).Scan(&balances); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\napplied %d, duplicates %d, refused %d\n", balances, counts[inbox.Applied], counts[inbox.Duplicate], counts[inbox.Refused])
	return nil
}

// apply moves the money in the inbox's transaction; an overdraft or a
// malformed message is refused for good.
func apply(ctx context.Context, m *inbox.Message) error {
	var t transfer
	if err := json.Unmarshal(m.Body, &t); err != nil || t.Amount <= 0 {
		return inbox.Refuse(fmt.Errorf("malformed transfer: %s", m.Body))
	}
	tx, _ := sqlitestore.TxFrom(ctx)
	res, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance >= ?`, t.Amount, t.From, t.Amount)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return inbox.Refuse(fmt.Errorf("insufficient funds in %s", t.From))
	}
	_, err = tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + ? WHERE id = ?`, t.Amount, t.To)
	return err
}

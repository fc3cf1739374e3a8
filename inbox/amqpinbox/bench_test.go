package amqpinbox

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/amqptest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkConsume measures how fast a queue is consumed through the inbox
// (Consumer.Consume, each transfer committed with its message id) against
// the same consumer without dedup (the same transfer in a transaction of
// its own, then the ack), on the same broker and database, with the same
// prefetch and concurrency. The two run in alternating rounds of 250
// messages, so that a change in the machine's load falls on both; b.N is
// the number of messages each consumes. It reports both rates and their
// ratio (inbox ÷ plain).
func BenchmarkConsume(b *testing.B) {
	for _, db := range databases {
		for _, conc := range []int{1, 4, 8} {
			if db.name == "SQLite" && conc > 1 {
				continue // one writer at a time: more workers only queue
			}
			b.Run(fmt.Sprintf("%s/c=%d", db.name, conc), func(b *testing.B) {
				benchConsume(b, db.open(b), conc)
			})
		}
	}
}

func benchConsume(b *testing.B, l *ledger, conc int) {
	conn := amqptest.Dial(b)
	qInbox, qPlain := amqptest.Name(b, "bench-inbox"), amqptest.Name(b, "bench-plain")
	for _, q := range []string{qInbox, qPlain} {
		if _, err := DeclareQueue(conn, q, nil); err != nil {
			b.Fatal(err)
		}
	}
	// Transfers between many accounts, so that concurrent ones do not all
	// queue on the same two rows.
	const accounts = 1000
	for i := range accounts {
		if err := l.insertAccount(fmt.Sprintf("x%04d", i)); err != nil {
			b.Fatal(err)
		}
	}
	pub, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	var applied atomic.Int64
	ib, err := inbox.New(l.store, &inbox.Config{Name: "bench", Observer: func(e inbox.Event) {
		if e.Outcome == inbox.Applied {
			applied.Add(1)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(ib, l.transfer, &Config{Concurrency: conc})
	if err != nil {
		b.Fatal(err)
	}
	plain := plainConsumer(b, l)

	const round = 250
	var tInbox, tPlain time.Duration
	seq := 0
	publish := func(q string, n int) {
		for range n {
			seq++
			from, to := rand.IntN(accounts), rand.IntN(accounts-1)
			if to >= from {
				to++
			}
			body, _ := json.Marshal(transferBody{Amount: 1, From: fmt.Sprintf("x%04d", from), To: fmt.Sprintf("x%04d", to)})
			if err := Publish(context.Background(), pub, "", q, amqp.Publishing{Body: body}, fmt.Sprintf("b-%d", seq)); err != nil {
				b.Fatal(err)
			}
		}
	}
	consume := func(q string, n int, viaInbox bool) time.Duration {
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		defer ch.Close()
		ctx, cancel := context.WithCancel(context.Background())
		var done atomic.Int64
		var errc = make(chan error, 1)
		start := time.Now()
		if viaInbox {
			target := applied.Load() + int64(n)
			go func() { errc <- c.Consume(ctx, ch, q) }()
			for applied.Load() < target {
				time.Sleep(100 * time.Microsecond)
			}
		} else {
			go func() { errc <- plain(ctx, ch, q, conc, &done) }()
			for done.Load() < int64(n) {
				time.Sleep(100 * time.Microsecond)
			}
		}
		took := time.Since(start)
		cancel()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		return took
	}
	b.ResetTimer()
	for left, r := b.N, 0; left > 0; r++ {
		n := min(left, round)
		left -= n
		b.StopTimer()
		publish(qInbox, n)
		publish(qPlain, n)
		b.StartTimer()
		if r%2 == 0 {
			tInbox += consume(qInbox, n, true)
			tPlain += consume(qPlain, n, false)
		} else {
			tPlain += consume(qPlain, n, false)
			tInbox += consume(qInbox, n, true)
		}
	}
	b.StopTimer()
	inboxRate := float64(b.N) / tInbox.Seconds()
	plainRate := float64(b.N) / tPlain.Seconds()
	b.ReportMetric(inboxRate, "inbox-msg/s")
	b.ReportMetric(plainRate, "plain-msg/s")
	b.ReportMetric(inboxRate/plainRate, "ratio")
}

// plainConsumer returns a consumer without dedup: each delivery's transfer
// in a transaction of its own, committed, then acknowledged; conc workers.
// It counts the deliveries done.
func plainConsumer(b *testing.B, l *ledger) func(ctx context.Context, ch *amqp.Channel, q string, conc int, done *atomic.Int64) error {
	var apply func(ctx context.Context, m *inbox.Message) error
	switch s := l.store.(type) {
	case *pgstore.Store:
		apply = func(ctx context.Context, m *inbox.Message) error {
			tx, err := s.Pool().Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			if err := transferIn(m, func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err }); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
	case *sqlitestore.Store:
		apply = func(ctx context.Context, m *inbox.Message) error {
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			if err := transferIn(m, func(q string, args ...any) error {
				_, err := tx.ExecContext(ctx, strings.ReplaceAll(q, "$", "?"), args...)
				return err
			}); err != nil {
				return err
			}
			return tx.Commit()
		}
	default:
		b.Fatalf("no plain consumer for %T", l.store)
	}
	return func(ctx context.Context, ch *amqp.Channel, q string, conc int, done *atomic.Int64) error {
		if err := ch.Qos(max(DefaultPrefetch, 2*conc), 0, false); err != nil {
			return err
		}
		deliveries, err := ch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			return err
		}
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for {
					select {
					case <-ctx.Done():
						return
					case d, ok := <-deliveries:
						if !ok {
							return
						}
						m := &inbox.Message{ID: d.MessageId, Body: d.Body}
						if err := apply(ctx, m); err != nil {
							_ = d.Nack(false, true)
							continue
						}
						_ = d.Ack(false)
						done.Add(1)
					}
				}
			})
		}
		wg.Wait()
		return nil
	}
}

package natsinbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkConsume measures how fast one consumer applies a stream of
// transfers (a balance update and an effect row, in one transaction): with
// the inbox through natsinbox.Consume ("inbox"), and the same consumer
// without dedup ("plain": jetstream's Consume with the same prefetch, the
// same statements in a transaction of its own, then an ack). Each mode
// consumes b.N messages, in rounds that alternate the two so that both
// see the same load; a round's stream is filled before its clock starts.
// It reports each mode's rate and their ratio.
func BenchmarkConsume(b *testing.B) {
	_, js := natstest.Connect(b)
	for _, kind := range []string{postgres, sqlite} {
		b.Run(kind, func(b *testing.B) {
			l := newLedger(b, kind)
			const rounds = 4
			var took [2]time.Duration // inbox, plain
			for r := range rounds {
				n := b.N / rounds
				if r == rounds-1 {
					n = b.N - n*(rounds-1)
				}
				if n == 0 {
					continue
				}
				for i := range 2 {
					withInbox := (i+r)%2 == 0 // who goes first alternates
					mode := 1
					if withInbox {
						mode = 0
					}
					took[mode] += consumeOnce(b, js, l, withInbox, n)
				}
			}
			inboxRate := float64(b.N) / took[0].Seconds()
			plainRate := float64(b.N) / took[1].Seconds()
			b.ReportMetric(inboxRate, "inbox-msgs/s")
			b.ReportMetric(plainRate, "plain-msgs/s")
			b.ReportMetric(inboxRate/plainRate, "inbox/plain")
		})
	}
}

// consumeOnce fills a fresh stream with n transfers, then consumes them,
// with the inbox or without, and returns how long that took.
func consumeOnce(b *testing.B, js jetstream.JetStream, l *ledger, withInbox bool, n int) time.Duration {
	b.StopTimer()
	r := newRig(b, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
	name := natstest.Name(b)
	for i := range n {
		k := fmt.Sprintf("%s-%d", name, i)
		if _, err := js.PublishAsync(r.subject, body(k, 1), jetstream.WithMsgID(k)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		b.Fatal("the stream did not acknowledge the publishes within 60 s")
	}

	var done atomic.Int64
	all := make(chan struct{})
	count := func() {
		if done.Add(1) == int64(n) {
			close(all)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ib *inbox.Inbox
	if withInbox {
		var err error
		ib, err = inbox.New(l.store, &inbox.Config{Name: name, Observer: func(e inbox.Event) {
			if e.Outcome == inbox.Applied {
				count()
			}
		}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StartTimer()
	start := time.Now()
	var stop func()
	if withInbox {
		errc := make(chan error, 1)
		go func() { errc <- natsinbox.Consume(ctx, r.cons, ib, apply, nil) }()
		stop = func() {
			cancel()
			if err := <-errc; err != nil {
				b.Error(err)
			}
		}
	} else {
		cc, err := r.cons.Consume(func(msg jetstream.Msg) {
			if err := plainApply(ctx, l, msg); err != nil {
				b.Error(err)
				_ = msg.Nak()
				return
			}
			if err := msg.Ack(); err != nil {
				b.Error(err)
			}
			count()
		}, jetstream.PullMaxMessages(natsinbox.DefaultPrefetch))
		if err != nil {
			b.Fatal(err)
		}
		stop = cc.Stop
	}
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d messages applied after 10 min", done.Load(), n)
	}
	took := time.Since(start)
	b.StopTimer()
	stop()
	return took
}

// plainApply is apply without the inbox: the same statements, in a
// transaction of its own.
func plainApply(ctx context.Context, l *ledger, msg jetstream.Msg) error {
	var tr transfer
	if err := json.Unmarshal(msg.Data(), &tr); err != nil {
		return err
	}
	id := msg.Headers().Get(jetstream.MsgIDHeader)
	if s, ok := l.store.(*pgstore.Store); ok {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := tx.Exec(ctx, `INSERT INTO effects (message_id, amount) VALUES ($1, $2)`, id, tr.Amount); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE balance SET amount = amount + $1 WHERE id = 'total'`, tr.Amount); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	tx, err := l.store.(*sqlitestore.Store).DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer rollback(tx)
	if _, err := tx.ExecContext(ctx, `INSERT INTO effects (message_id, amount) VALUES ($1, $2)`, id, tr.Amount); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE balance SET amount = amount + $1 WHERE id = 'total'`, tr.Amount); err != nil {
		return err
	}
	return tx.Commit()
}

func rollback(tx *sql.Tx) { _ = tx.Rollback() }

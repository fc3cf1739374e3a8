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
// same statements in a transaction of its own, then an ack). The stream is
// filled before the timer starts; msgs/s is b.N over the time to apply
// them all. Run with -count to interleave the two.
func BenchmarkConsume(b *testing.B) {
	_, js := natstest.Connect(b)
	for _, kind := range []string{postgres, sqlite} {
		b.Run(kind, func(b *testing.B) {
			l := newLedger(b, kind)
			b.Run("inbox", func(b *testing.B) { benchConsume(b, js, l, true) })
			b.Run("plain", func(b *testing.B) { benchConsume(b, js, l, false) })
		})
	}
}

func benchConsume(b *testing.B, js jetstream.JetStream, l *ledger, withInbox bool) {
	r := newRig(b, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
	name := natstest.Name(b)
	for i := range b.N {
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
		if done.Add(1) == int64(b.N) {
			close(all)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	start := time.Now()
	var stop func()
	if withInbox {
		ib, err := inbox.New(l.store, &inbox.Config{Name: name, Observer: func(e inbox.Event) {
			if e.Outcome == inbox.Applied {
				count()
			}
		}})
		if err != nil {
			b.Fatal(err)
		}
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
		b.Fatalf("%d of %d messages applied after 10 min", done.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
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

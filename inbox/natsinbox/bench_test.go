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
// transfers (an effect row and a balance update, in one transaction) with
// the inbox through natsinbox.Consume ("inbox"), with the inbox called
// directly from jetstream's Consume callback ("process": what the adapter
// adds is the difference), and without dedup ("plain": the same callback,
// the same statements in a transaction of its own, then an ack). All use
// the same prefetch, and each its own stream. Each variant consumes b.N
// messages in rounds of benchRound, the variants taking turns (and
// rotating who goes first), so that all see the same load; a round's
// messages are published before its clock starts. It reports each
// variant's rate and the ratios to plain.
func BenchmarkConsume(b *testing.B) {
	_, js := natstest.Connect(b)
	for _, kind := range []string{postgres, sqlite} {
		b.Run(kind, func(b *testing.B) {
			l := newLedger(b, kind)
			var (
				rigs    [variants]*rig
				ibs     [variants]*inbox.Inbox
				took    [variants]time.Duration
				applied atomic.Pointer[func()] // the adapter's round's counter
			)
			for v := range variants {
				rigs[v] = newRig(b, js, jetstream.StreamConfig{}, jetstream.ConsumerConfig{AckWait: 30 * time.Second})
				cfg := &inbox.Config{Name: natstest.Name(b)}
				if v == viaAdapter {
					// Told after the commit, as the ack follows.
					cfg.Observer = func(e inbox.Event) {
						if f := applied.Load(); f != nil && e.Outcome == inbox.Applied {
							(*f)()
						}
					}
				}
				var err error
				if ibs[v], err = inbox.New(l.store, cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for r, left := 0, b.N; left > 0; r++ {
				n := min(left, benchRound)
				left -= n
				for i := range variants {
					v := (i + r) % variants
					took[v] += consumeRound(b, js, rigs[v], l, ibs[v], v, n, &applied)
				}
			}
			var rate [variants]float64
			for v := range variants {
				rate[v] = float64(b.N) / took[v].Seconds()
			}
			b.ReportMetric(rate[viaAdapter], "inbox-msgs/s")
			b.ReportMetric(rate[viaProcess], "process-msgs/s")
			b.ReportMetric(rate[plain], "plain-msgs/s")
			b.ReportMetric(rate[viaAdapter]/rate[plain], "inbox/plain")
			b.ReportMetric(rate[viaProcess]/rate[plain], "process/plain")
		})
	}
}

// benchRound is how many messages a variant consumes in a turn.
const benchRound = 100

// The variants of BenchmarkConsume.
const (
	viaAdapter = iota // natsinbox.Consume with the inbox
	viaProcess        // a jetstream callback calling inbox.Process, then Ack
	plain             // the same callback, the same statements, no inbox
	variants
)

// consumeRound publishes n transfers to r's stream, then consumes them
// through variant v, and returns how long that took.
func consumeRound(b *testing.B, js jetstream.JetStream, r *rig, l *ledger, ib *inbox.Inbox, v, n int, applied *atomic.Pointer[func()]) time.Duration {
	b.StopTimer()
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
	applied.Store(&count)
	// The callback of the variants that do without the adapter.
	callback := func(msg jetstream.Msg) {
		var err error
		if v == viaProcess {
			var o inbox.Outcome
			o, err = ib.Process(ctx, &inbox.Message{ID: msg.Headers().Get(jetstream.MsgIDHeader), Body: msg.Data()}, apply)
			if o == inbox.Applied {
				err = nil
			} else if err == nil {
				err = fmt.Errorf("outcome %s", o)
			}
		} else {
			err = plainApply(ctx, l, msg)
		}
		if err != nil {
			b.Error(err)
			_ = msg.Nak()
			return
		}
		if err := msg.Ack(); err != nil {
			b.Error(err)
		}
		count()
	}
	b.StartTimer()
	start := time.Now()
	var stop func()
	if v == viaAdapter {
		errc := make(chan error, 1)
		go func() { errc <- natsinbox.Consume(ctx, r.cons, ib, apply, nil) }()
		stop = func() {
			cancel()
			if err := <-errc; err != nil {
				b.Error(err)
			}
		}
	} else {
		cc, err := r.cons.Consume(callback, jetstream.PullMaxMessages(natsinbox.DefaultPrefetch))
		if err != nil {
			b.Fatal(err)
		}
		stop = func() {
			cc.Drain()
			<-cc.Closed()
		}
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

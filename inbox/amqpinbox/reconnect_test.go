package amqpinbox

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/internal/amqptest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// When the connection to the broker is cut mid-consumption (through a
// proxy, as a broker restart or a network fault would), Run connects
// again and carries on; the deliveries the cut left unsettled come again,
// and every message is applied exactly once.
func TestRunReconnectsAfterTheConnectionIsCut(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, db.open(t), amqp.QueueTypeQuorum, 0)
			proxy, url := amqptest.Proxy(t)
			const n = 200
			for i := range n {
				f.publish(fmt.Sprintf("r-%d", i), int64(i%13+1))
			}
			cfg := *fast
			cfg.Concurrency = 2
			cfg.Logger = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
			f.run(&cfg, func(ctx context.Context, m *inbox.Message) error {
				time.Sleep(2 * time.Millisecond) // so that cuts fall mid-consumption
				return f.db.transfer(ctx, m)
			}, url)
			cuts := 0
			for _, at := range []int{n / 5, n / 2, 3 * n / 4} {
				waitFor(t, fmt.Sprintf("%d messages applied", at), func() bool { return f.seen.get(inbox.Applied) >= at })
				if proxy.Cut() > 0 {
					cuts++
				}
			}
			waitFor(t, "every message applied", func() bool { return f.seen.get(inbox.Applied) == n })
			waitFor(t, "an empty queue", func() bool { return f.depth(f.queue) == 0 })
			f.db.checkOnce(t, f.amount)
			if cuts != 3 {
				t.Errorf("%d of 3 cuts found a connection to cut", cuts)
			}
			t.Logf("outcomes after %d cuts: %s", cuts, f.seen)
		})
	}
}

// tWriter writes log lines to the test's log.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// When the broker cancels the consumer (its queue was deleted), Run starts
// again: Config.Setup declares the queue anew and consumption carries on.
func TestRunRecoversWhenTheQueueIsDeleted(t *testing.T) {
	t.Parallel()
	f := setup(t, newSQLiteLedger(t), amqp.QueueTypeQuorum, 0)
	cfg := *fast
	cfg.Setup = func(_ context.Context, conn *amqp.Connection) error {
		_, err := DeclareQueue(conn, f.queue, nil)
		return err
	}
	f.publish("before", 1)
	f.run(&cfg, nil, "")
	waitFor(t, "the first message applied", func() bool { return f.seen.get(inbox.Applied) == 1 })
	ch, err := f.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDelete(f.queue, false, false, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queue declared again", func() bool {
		c, err := f.conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		q, err := c.QueueDeclarePassive(f.queue, true, false, false, false, nil)
		return err == nil && q.Consumers == 1
	})
	f.publish("after", 2)
	waitFor(t, "the second message applied", func() bool { return f.seen.get(inbox.Applied) == 2 })
	f.db.checkOnce(t, f.amount)
}

package pgstore

import (
	"context"
	"sync"
	"time"
)

// notifySpacing is the least time between two NOTIFYs of one store's
// notifier: one NOTIFY wakes the relays for every message committed
// before it, so at a high commit rate fewer NOTIFYs mean fewer commits of
// their own and fuller claims (docs/BENCHMARKS.md, "Transfer events":
// over HTTP with the relay running, 1 ms kept 0.70 of the throughput, 5
// ms 0.78–0.83), for at most this much more lag.
const notifySpacing = 5 * time.Millisecond

// notifyTimeout bounds one NOTIFY.
const notifyTimeout = 5 * time.Second

// notifier sends the NOTIFY that wakes the relays (Outbox.Wait) after
// transactions that staged messages commit. A NOTIFY inside the
// transaction would serialize the commits of every staging transaction
// on PostgreSQL's notification queue lock (held from the NOTIFY's
// pre-commit to the end of the commit, WAL flush included): measured, it
// cost staging transfers about 12 % of their throughput. Outside, the
// pokes of many commits coalesce into one NOTIFY on a pooled connection,
// at most one at a time. A process that dies between a commit and its
// NOTIFY leaves the message to the relays' polling (outbox.RelayConfig).
type notifier struct {
	s      *Store
	wake   chan struct{} // capacity 1: a NOTIFY is owed
	ctx    context.Context
	stop   context.CancelFunc // called by close
	done   chan struct{}      // closed when run returns
	closed sync.Once
}

// outboxNotifier returns the store's notifier, started on first use.
func (s *Store) outboxNotifier() *notifier {
	s.notifyOnce.Do(func() {
		ctx, stop := context.WithCancel(context.Background())
		s.notify = &notifier{s: s, wake: make(chan struct{}, 1), ctx: ctx, stop: stop, done: make(chan struct{})}
		go s.notify.run()
	})
	return s.notify
}

// poke asks for a NOTIFY after the commits made so far. A nil notifier
// (the store closed before any staging) does nothing.
func (n *notifier) poke() {
	if n == nil {
		return
	}
	select {
	case n.wake <- struct{}{}:
	default: // one is owed already, and will be sent after this commit
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.wake:
		}
		n.send(n.ctx)
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(notifySpacing):
		}
	}
}

// send sends one NOTIFY. A failed one (the server away) is made up for by
// the relays' polling, and the next commit pokes again.
func (n *notifier) send(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	_, _ = n.s.pool.Exec(ctx, n.s.outboxSQL().Notify, n.s.names.OutboxChannel)
}

// close stops the notifier and waits for it; a NOTIFY owed is sent first,
// unless the pool is closing.
func (n *notifier) close() {
	n.closed.Do(func() {
		n.stop()
		<-n.done
		select {
		case <-n.wake:
			n.send(context.Background())
		default:
		}
	})
}

package amqpinbox

import (
	"container/list"
	"sync"

	"github.com/idemkit/idem/inbox"
	amqp "github.com/rabbitmq/amqp091-go"
)

// maxTrackedAttempts bounds the message ids a Consumer counts deliveries
// of itself.
const maxTrackedAttempts = 10000

// attempts numbers the deliveries of each message (inbox.Message.Attempt).
//
// A quorum queue says how often a message was delivered before, in the
// x-delivery-count header. A classic queue says only whether it was
// (Redelivered), so the consumer also counts, per message id, the
// deliveries whose outcome was Retry; the attempt is the larger of the
// two. The count is approximate: it lives in this process (several
// consumers on one classic queue each count their own deliveries, so a
// message may take up to MaxAttempts deliveries per consumer before it is
// dead-lettered, and a restart starts again from 2), and it holds at most
// maxTrackedAttempts ids, forgetting the least recently retried first.
// It never makes a message dead-letter early: it counts only deliveries
// that failed.
type attempts struct {
	mu    sync.Mutex
	limit int
	ids   map[string]*list.Element // of *attemptCount
	order list.List                // least recently retried first
}

type attemptCount struct {
	id string
	n  int
}

func newAttempts(limit int) *attempts {
	return &attempts{limit: limit, ids: make(map[string]*list.Element)}
}

// begin returns the attempt number of d, a delivery of message id.
func (a *attempts) begin(id string, d amqp.Delivery) int {
	n := 1
	if d.Redelivered {
		n = 2
		a.mu.Lock()
		if e, ok := a.ids[id]; ok {
			n = max(n, e.Value.(*attemptCount).n+1)
		}
		a.mu.Unlock()
	}
	if k, ok := deliveryCount(d.Headers); ok {
		n = max(n, k+1)
	}
	return n
}

// end records the outcome of attempt n of message id: a Retry is
// remembered for the next delivery, any other outcome ends the count.
func (a *attempts) end(id string, n int, o inbox.Outcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.ids[id]
	switch {
	case o != inbox.Retry:
		if ok {
			a.order.Remove(e)
			delete(a.ids, id)
		}
	case ok:
		c := e.Value.(*attemptCount)
		c.n = max(c.n, n)
		a.order.MoveToBack(e)
	default:
		if a.order.Len() >= a.limit {
			oldest := a.order.Front()
			a.order.Remove(oldest)
			delete(a.ids, oldest.Value.(*attemptCount).id)
		}
		a.ids[id] = a.order.PushBack(&attemptCount{id: id, n: n})
	}
}

// deliveryCount returns the x-delivery-count header of a quorum queue's
// delivery: how many times it was delivered before.
func deliveryCount(h amqp.Table) (int, bool) {
	switch v := h["x-delivery-count"].(type) {
	case int64:
		return clampCount(v), true
	case int32:
		return clampCount(int64(v)), true
	case int16:
		return clampCount(int64(v)), true
	case int8:
		return clampCount(int64(v)), true
	case int:
		return clampCount(int64(v)), true
	case uint8:
		return int(v), true
	case uint16:
		return int(v), true
	case uint32:
		return clampCount(int64(v)), true
	case uint64:
		if v > 1<<31 {
			return 1 << 31, true
		}
		return int(v), true
	}
	return 0, false
}

func clampCount(v int64) int {
	return int(min(max(v, 0), 1<<31))
}

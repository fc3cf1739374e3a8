package amqpinbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Errors of Publish. Each means the message may not be in a queue: publish
// it again with the same id (the consumer's inbox applies it once).
var (
	// ErrNacked means the broker refused the message (negative confirm),
	// or the channel closed before it confirmed.
	ErrNacked = errors.New("amqpinbox: the broker did not confirm the message")

	// ErrUnroutable means the broker confirmed the message but routed it
	// to no queue: the exchange has no binding for its routing key (or,
	// on the default exchange, no queue has that name). Declare the queue
	// and its binding before publishing.
	ErrUnroutable = errors.New("amqpinbox: the message was routed to no queue")
)

// PublishTimeout is how long Publish waits for the broker's confirm when
// ctx has no deadline.
const PublishTimeout = 30 * time.Second

// Publish sends msg to exchange with routingKey, its message_id set to id,
// and waits for the broker to confirm that a queue holds it. Make id from
// the intent, once (the transfer the user confirmed, not the attempt), and
// publish again with the same id whenever Publish fails: an error (a
// nack, a timeout, a closed channel, a message routed nowhere) leaves it
// unknown whether the message is queued, and the consumer's inbox drops
// the copy if both arrive.
//
// Publish puts ch in confirm mode and publishes with the mandatory flag,
// so that a message no queue takes is an error (ErrUnroutable) rather
// than confirmed and dropped. A message whose DeliveryMode is not set is
// sent persistent. msg.MessageId must be empty or equal to id. ch may be
// shared by concurrent Publish calls; it should not be used for anything
// else that needs its own confirms.
func Publish(ctx context.Context, ch *amqp.Channel, exchange, routingKey string, msg amqp.Publishing, id string) error {
	switch {
	case id == "":
		return errors.New("amqpinbox: Publish: id is empty")
	case len(id) > 255:
		return fmt.Errorf("amqpinbox: Publish: id must be at most 255 bytes (message_id is a short string), got %d", len(id))
	case msg.MessageId != "" && msg.MessageId != id:
		return fmt.Errorf("amqpinbox: Publish: msg.MessageId %q differs from id %q", msg.MessageId, id)
	}
	msg.MessageId = id
	if msg.DeliveryMode == 0 {
		msg.DeliveryMode = amqp.Persistent
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, PublishTimeout)
		defer cancel()
	}
	p, err := publisherOf(ch)
	if err != nil {
		return err
	}
	k := returnKey(exchange, routingKey, id)
	p.expect(k)
	defer p.forget(k)
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, routingKey, true, false, msg)
	if err != nil {
		return fmt.Errorf("amqpinbox: Publish %q: %w", id, err)
	}
	if dc == nil {
		return fmt.Errorf("amqpinbox: Publish %q: the channel is not in confirm mode", id)
	}
	acked, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("amqpinbox: Publish %q: no confirm: %w", id, err)
	case !acked:
		return fmt.Errorf("%w (message %q)", ErrNacked, id)
	case p.returned(k):
		return fmt.Errorf("%w (message %q, exchange %q, routing key %q)", ErrUnroutable, id, exchange, routingKey)
	}
	return nil
}

// publisher is what Publish keeps per channel: its confirm mode, and the
// messages the broker returned as unroutable.
type publisher struct {
	sync   chan chan struct{} // a round trip through watch
	closed chan struct{}      // closed when the channel's returns end

	mu       sync.Mutex
	expected map[string]int // publishes waiting for their confirm, by returnKey
	back     map[string]int // of those, returned
}

// returnKey tells a return's publish apart: what a return says of it.
// Concurrent publishes with one key are one message sent alike, routed
// alike.
func returnKey(exchange, routingKey, id string) string {
	return exchange + "\x00" + routingKey + "\x00" + id
}

var publishers sync.Map // *amqp.Channel → *publisher

// publisherOf returns ch's publisher, putting ch in confirm mode and
// watching its returns the first time. It is forgotten when ch closes.
func publisherOf(ch *amqp.Channel) (*publisher, error) {
	if p, ok := publishers.Load(ch); ok {
		return p.(*publisher), nil
	}
	// Serialise first uses of one channel so it is set up once.
	setupMu.Lock()
	defer setupMu.Unlock()
	if p, ok := publishers.Load(ch); ok {
		return p.(*publisher), nil
	}
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("amqpinbox: Publish: put the channel in confirm mode: %w", err)
	}
	p := &publisher{
		sync:     make(chan chan struct{}),
		closed:   make(chan struct{}),
		expected: make(map[string]int),
		back:     make(map[string]int),
	}
	// Unbuffered: amqp091 hands a return over before it handles the
	// confirm that follows it, so once a confirm is in, watch has
	// received every return that came before.
	returns := ch.NotifyReturn(make(chan amqp.Return))
	publishers.Store(ch, p)
	go p.watch(ch, returns)
	return p, nil
}

var setupMu sync.Mutex

// watch records returned messages until ch closes.
func (p *publisher) watch(ch *amqp.Channel, returns <-chan amqp.Return) {
	defer close(p.closed)
	defer publishers.Delete(ch)
	for {
		select {
		case r, ok := <-returns:
			if !ok {
				return
			}
			k := returnKey(r.Exchange, r.RoutingKey, r.MessageId)
			p.mu.Lock()
			if p.expected[k] > p.back[k] {
				p.back[k]++
			}
			p.mu.Unlock()
		case done := <-p.sync:
			close(done)
		}
	}
}

func (p *publisher) expect(k string) {
	p.mu.Lock()
	p.expected[k]++
	p.mu.Unlock()
}

func (p *publisher) forget(k string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expected[k]--; p.expected[k] <= 0 {
		delete(p.expected, k)
	}
	if p.back[k] > p.expected[k] {
		if p.back[k] = p.expected[k]; p.back[k] == 0 {
			delete(p.back, k)
		}
	}
}

// returned reports whether a publish of k, now confirmed, was returned,
// and counts that return as consumed.
func (p *publisher) returned(k string) bool {
	done := make(chan struct{})
	select {
	case p.sync <- done:
		<-done
	case <-p.closed:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.back[k] > 0 {
		p.back[k]--
		return true
	}
	return false
}

package amqpinbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idem/inbox"
	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrConsumerCancelled means the broker cancelled the consumer while its
// channel stayed open: the queue was deleted, or its node went away.
var ErrConsumerCancelled = errors.New("amqpinbox: the broker cancelled the consumer")

// Consume consumes queue on ch, which the caller owns, until ctx ends or
// the channel or the consumer closes. It sets the channel's prefetch
// (Config.Prefetch) and processes deliveries with Config.Concurrency
// workers, each settled as Handle settles it, except that a delivery to
// retry is held for its retry delay without holding up the next ones.
//
// When ctx ends, Consume cancels its consumer, requeues the deliveries it
// had not started and those held for a retry, waits for those in progress
// (their handlers see ctx end, so their transactions roll back unless
// they already succeeded) and returns nil. When the channel or the
// consumer closes first (a lost connection, a deleted queue), it returns
// an error saying why; the broker redelivers whatever was not settled.
// Consume does not reconnect: Run does.
func (c *Consumer) Consume(ctx context.Context, ch *amqp.Channel, queue string) error {
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Qos(c.cfg.Prefetch, 0, false); err != nil {
		return fmt.Errorf("amqpinbox: set the prefetch of queue %q: %w", queue, err)
	}
	tag := consumerTag()
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("amqpinbox: consume queue %q: %w", queue, err)
	}
	s := &session{c: c, held: make(map[uint64]heldDelivery)}
	work := make(chan amqp.Delivery)
	var wg sync.WaitGroup
	for range c.cfg.Concurrency {
		wg.Go(func() {
			for d := range work {
				s.handle(ctx, d)
			}
		})
	}
	err = s.dispatch(ctx, deliveries, work)
	if err == nil {
		// Stopped by ctx: no new deliveries; give back the ones the
		// broker had already sent. Cancel fails only on a closed channel,
		// which closes deliveries too.
		_ = ch.Cancel(tag, false)
		for d := range deliveries {
			_ = d.Nack(false, true)
		}
	} else {
		select {
		case e, ok := <-closed:
			if ok && e != nil {
				err = fmt.Errorf("amqpinbox: consume queue %q: channel closed: %w", queue, e)
			} else {
				err = fmt.Errorf("amqpinbox: consume queue %q: %w", queue, amqp.ErrClosed)
			}
		default:
			err = fmt.Errorf("%w (queue %q)", ErrConsumerCancelled, queue)
		}
	}
	close(work)
	wg.Wait()
	s.requeueHeld()
	return err
}

// consumerTag returns a tag no other consumer on the channel has.
func consumerTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "amqpinbox-" + hex.EncodeToString(b[:])
}

// session is one call of Consume: the deliveries held for a retry.
type session struct {
	c *Consumer

	mu      sync.Mutex
	held    map[uint64]heldDelivery // by delivery tag
	stopped bool
}

type heldDelivery struct {
	d amqp.Delivery
	t *time.Timer
}

// dispatch hands deliveries to the workers until ctx ends (nil) or
// deliveries closes (an error, refined by Consume).
func (s *session) dispatch(ctx context.Context, deliveries <-chan amqp.Delivery, work chan<- amqp.Delivery) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return amqp.ErrClosed
			}
			select {
			case work <- d:
			case <-ctx.Done():
				_ = d.Nack(false, true)
				return nil
			}
		}
	}
}

// handle processes and settles d, or holds it for its retry delay.
func (s *session) handle(ctx context.Context, d amqp.Delivery) {
	o, attempt, _ := s.c.process(ctx, d)
	if o == inbox.Retry && ctx.Err() == nil {
		s.hold(d, s.c.retryDelay(attempt))
		return
	}
	s.settle(ctx, d, o)
}

func (s *session) settle(ctx context.Context, d amqp.Delivery, o inbox.Outcome) {
	if err := s.c.settle(d, o); err != nil && s.c.cfg.Logger != nil {
		s.c.cfg.Logger.WarnContext(ctx, "amqpinbox: the broker will redeliver a delivery it could not be told the outcome of", "error", err)
	}
}

// hold requeues d after delay. Whoever takes d out of held (the timer or
// requeueHeld) requeues it, so it is requeued exactly once.
func (s *session) hold(d amqp.Delivery, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		_ = d.Nack(false, true)
		return
	}
	tag := d.DeliveryTag
	s.held[tag] = heldDelivery{d: d, t: time.AfterFunc(delay, func() {
		s.mu.Lock()
		h, ok := s.held[tag]
		delete(s.held, tag)
		s.mu.Unlock()
		if ok {
			s.settle(context.Background(), h.d, inbox.Retry)
		}
	})}
}

// requeueHeld requeues at once the deliveries held for a retry.
func (s *session) requeueHeld() {
	s.mu.Lock()
	held := s.held
	s.held, s.stopped = nil, true
	s.mu.Unlock()
	for _, h := range held {
		h.t.Stop()
		_ = h.d.Nack(false, true)
	}
}

package amqpinbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Consumer applies RabbitMQ deliveries through an inbox and settles each
// once its outcome is durable. It is safe for concurrent use: Run,
// Consume and Handle may be called from several goroutines, on several
// channels and queues.
type Consumer struct {
	ib       *inbox.Inbox
	h        inbox.Handler
	cfg      Config
	attempts *attempts
}

// New returns a Consumer that runs h for each delivery through ib. A nil
// cfg means defaults.
func New(ib *inbox.Inbox, h inbox.Handler, cfg *Config) (*Consumer, error) {
	if ib == nil {
		return nil, errors.New("amqpinbox: New: inbox is nil")
	}
	if h == nil {
		return nil, errors.New("amqpinbox: New: handler is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Consumer{ib: ib, h: recovering(h, c.Logger), cfg: c, attempts: newAttempts(maxTrackedAttempts)}, nil
}

// recovering turns a panic of h into an error, so that a message whose
// handler panics is retried and, after MaxAttempts, dead-lettered, rather
// than crashing every consumer it is redelivered to. Its transaction rolls
// back as for any error.
func recovering(h inbox.Handler, log *slog.Logger) inbox.Handler {
	return func(ctx context.Context, m *inbox.Message) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("amqpinbox: handler panicked: %v", r)
				if log != nil {
					log.ErrorContext(ctx, "amqpinbox: handler panicked", "key_sha256", idem.KeyHash(inbox.Key(m.ID)), "panic", r, "stack", string(debug.Stack()))
				}
			}
		}()
		return h(ctx, m)
	}
}

// Handle processes one delivery through the inbox and settles it: ack,
// nack with requeue or reject, as the package documentation says. Before
// requeueing a delivery whose outcome is Retry, it waits the retry delay
// of its attempt, or until ctx ends. The delivery must come from a
// consumer with manual acknowledgements.
//
// The error is the one Process returned with the outcome (nil for Applied
// and Duplicate), joined with the broker's if the settlement failed; a
// settlement that failed leaves the delivery to the broker, which
// delivers it again when the channel closes.
func (c *Consumer) Handle(ctx context.Context, d amqp.Delivery) (inbox.Outcome, error) {
	o, attempt, err := c.process(ctx, d)
	if o == inbox.Retry {
		t := time.NewTimer(c.retryDelay(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return o, errors.Join(err, c.settle(d, o))
}

// testHookProcessed, when set, runs between a delivery's processing (its
// commit) and its settlement (its ack): tests kill the process there.
var testHookProcessed func(inbox.Outcome)

// process runs d through the inbox and returns the outcome and the
// delivery's attempt number.
func (c *Consumer) process(ctx context.Context, d amqp.Delivery) (inbox.Outcome, int, error) {
	id, err := c.messageID(d)
	if err == nil && id == "" {
		err = inbox.ErrNoID
	}
	if err != nil {
		// Nothing could tell its redelivery from a new message.
		if l := c.cfg.Logger; l != nil {
			l.ErrorContext(ctx, "amqpinbox: dead-lettering a delivery without a message id", "error", err, "exchange", d.Exchange, "routing_key", d.RoutingKey)
		}
		if testHookProcessed != nil {
			testHookProcessed(inbox.DeadLetter)
		}
		return inbox.DeadLetter, 0, err
	}
	m := &inbox.Message{ID: id, Body: d.Body, Header: header(d.Headers), Raw: d}
	m.Attempt = c.attempts.begin(id, d)
	o, err := c.ib.Process(ctx, m, c.h)
	if o == inbox.DeadLetter && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		// Cut short by the caller (a shutdown), not failed: a last
		// attempt interrupted so is delivered again.
		o = inbox.Retry
	}
	c.attempts.end(id, m.Attempt, o)
	if testHookProcessed != nil {
		testHookProcessed(o)
	}
	return o, m.Attempt, err
}

// messageID returns d's id: Config.MessageID's, or the message_id
// property.
func (c *Consumer) messageID(d amqp.Delivery) (string, error) {
	if c.cfg.MessageID == nil {
		return d.MessageId, nil
	}
	id, err := c.cfg.MessageID(d)
	if err != nil {
		return "", fmt.Errorf("%w: Config.MessageID: %w", inbox.ErrNoID, err)
	}
	return id, nil
}

// settle acknowledges, requeues or rejects d as its outcome says.
func (c *Consumer) settle(d amqp.Delivery, o inbox.Outcome) error {
	var err error
	switch o {
	case inbox.Applied, inbox.Duplicate:
		err = d.Ack(false)
	case inbox.Refused:
		if c.cfg.DeadLetterRefused {
			err = d.Nack(false, false)
		} else {
			err = d.Ack(false)
		}
	case inbox.DeadLetter:
		err = d.Nack(false, false)
	default: // Retry, and anything this version does not know
		err = d.Nack(false, true)
	}
	if err != nil {
		return fmt.Errorf("amqpinbox: settle delivery %d as %s: %w", d.DeliveryTag, o, err)
	}
	return nil
}

// retryDelay is how long the attempt-th delivery of a message is held
// before it is requeued: RetryDelay doubled per attempt after the first,
// capped at MaxRetryDelay, less up to a quarter at random so that
// consumers that failed together do not retry together.
func (c *Consumer) retryDelay(attempt int) time.Duration {
	d := c.cfg.RetryDelay
	for i := 1; i < attempt && d < c.cfg.MaxRetryDelay; i++ {
		d *= 2
	}
	d = min(d, c.cfg.MaxRetryDelay)
	return d - time.Duration(rand.Int64N(int64(d/4)+1))
}

// header turns AMQP headers into inbox.Message.Header: strings as they
// are, byte arrays as strings, arrays as several values, anything else
// in fmt's %v form.
func header(t amqp.Table) map[string][]string {
	if len(t) == 0 {
		return nil
	}
	h := make(map[string][]string, len(t))
	for k, v := range t {
		if vs, ok := v.([]any); ok {
			for _, e := range vs {
				h[k] = append(h[k], headerValue(e))
			}
			continue
		}
		h[k] = []string{headerValue(v)}
	}
	return h
}

func headerValue(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

// Package amqpoutbox is the outbox.Publisher for RabbitMQ (AMQP 0-9-1):
// each message is published persistent, with the mandatory flag and its id
// as the message-id property, on a channel in confirm mode, and the
// publish returns only once the broker has confirmed it (amqpinbox.Publish).
// A message returned as unroutable is a refusal, which the relay counts
// toward parking it; a negative confirm or a lost connection is a failure
// that the relay retries.
//
//	pub, err := amqpoutbox.New(&amqpoutbox.Config{URL: url, Exchange: "transfers.events"})
//	relay := outbox.NewRelay(store.Outbox(), pub, nil)
package amqpoutbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem/inbox/amqpinbox"
	"github.com/idemkit/idem/outbox"
)

// Config configures a Publisher.
type Config struct {
	// URL is the broker's amqp:// URL. Required.
	URL string
	// Exchange is the exchange the messages are published to; empty is
	// the default exchange (the routing key names the queue).
	Exchange string
	// RoutingKey is the routing key of the messages whose Subject is
	// empty. A message's Subject is its routing key.
	RoutingKey string
	// Setup, when set, runs on each new channel before its first publish:
	// declare the exchange, queues and bindings there, so that they
	// exist again after the broker lost them.
	Setup func(ch *amqp.Channel) error
}

// Publisher publishes envelopes to RabbitMQ over a connection of its own,
// dialled at the first publish and again after it broke. It is safe for
// concurrent use.
type Publisher struct {
	cfg Config

	mu   sync.Mutex
	conn *amqp.Connection
	ch   *amqp.Channel
}

var _ outbox.Publisher = (*Publisher)(nil)

// New returns a Publisher; it dials nothing yet.
func New(cfg *Config) (*Publisher, error) {
	if cfg == nil || cfg.URL == "" {
		return nil, errors.New("amqpoutbox: New: Config.URL is required")
	}
	return &Publisher{cfg: *cfg}, nil
}

func (p *Publisher) channel() (*amqp.Channel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil && !p.ch.IsClosed() && p.conn != nil && !p.conn.IsClosed() {
		return p.ch, nil
	}
	p.closeLocked()
	conn, err := amqp.Dial(p.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("amqpoutbox: dial: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("amqpoutbox: open a channel: %w", err)
	}
	if p.cfg.Setup != nil {
		if err := p.cfg.Setup(ch); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("amqpoutbox: setup: %w", err)
		}
	}
	p.conn, p.ch = conn, ch
	return ch, nil
}

func (p *Publisher) closeLocked() {
	if p.conn != nil {
		_ = p.conn.Close()
	}
	p.conn, p.ch = nil, nil
}

// Close closes the connection, if any.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
	return nil
}

// Publish implements outbox.Publisher.
func (p *Publisher) Publish(ctx context.Context, e outbox.Envelope) error {
	ch, err := p.channel()
	if err != nil {
		return err
	}
	key := e.Subject
	if key == "" {
		key = p.cfg.RoutingKey
	}
	msg := amqp.Publishing{Body: e.Body, DeliveryMode: amqp.Persistent}
	if len(e.Headers) > 0 {
		msg.Headers = make(amqp.Table, len(e.Headers))
		for k, v := range e.Headers {
			msg.Headers[k] = v
		}
		msg.ContentType = e.Headers["Content-Type"]
	}
	err = amqpinbox.Publish(ctx, ch, p.cfg.Exchange, key, msg, e.ID)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, amqpinbox.ErrUnroutable):
		return outbox.Refused(err)
	}
	if ch.IsClosed() {
		p.mu.Lock()
		if p.ch == ch {
			p.closeLocked()
		}
		p.mu.Unlock()
	}
	return err
}

package amqpinbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Config configures a Consumer. A nil *Config, and every field's zero
// value, mean defaults.
type Config struct {
	// MessageID returns the id of a delivery, for producers that set no
	// message_id (a business id in the body, say). A delivery whose id is
	// empty, or for which MessageID returns an error, is dead-lettered.
	// Defaults to the delivery's message_id property.
	MessageID func(amqp.Delivery) (string, error)

	// Prefetch is how many unacknowledged deliveries the broker may send
	// ahead (basic.qos prefetch count). Deliveries held back for a retry
	// count against it. Defaults to 32, or twice Concurrency when that is
	// more.
	Prefetch int

	// Concurrency is how many deliveries are processed at once. With 1,
	// deliveries are processed in the order they arrive (a retried one
	// comes back later). Defaults to 1.
	Concurrency int

	// RetryDelay is how long a delivery whose outcome is Retry is held
	// before it is requeued, on its first attempt; the delay doubles with
	// each attempt, up to MaxRetryDelay, so that a failing message does
	// not spin. Defaults to 1 second.
	RetryDelay time.Duration

	// MaxRetryDelay bounds the retry delay. Defaults to 30 seconds.
	MaxRetryDelay time.Duration

	// DeadLetterRefused rejects refused messages to the queue's
	// dead-letter exchange, after their refusal has committed, instead of
	// acknowledging them. It is at most once: a redelivery of a refused
	// message (the consumer died before the reject) is a Duplicate, and
	// acknowledged. Defaults to false.
	DeadLetterRefused bool

	// Setup runs on every connection Run opens, before it consumes:
	// declare the queue, its dead-letter exchange and their bindings
	// there (see DeclareQueue). Consume and Handle do not use it.
	// Defaults to none.
	Setup func(ctx context.Context, conn *amqp.Connection) error

	// AMQP is the connection configuration Run dials with (TLS, SASL,
	// connection properties). Its Heartbeat, when zero, is
	// DefaultHeartbeat; its Dial, when nil, dials with a 30 second
	// timeout that ctx also cuts short. Defaults to amqp091's defaults.
	AMQP amqp.Config

	// Logger receives what Run does with connections (lost, reconnected),
	// deliveries without an id, handler panics and deliveries the broker
	// could not be told the outcome of. Outcomes are logged by the Inbox's
	// own Config.Logger. Defaults to none.
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultPrefetch      = 32
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = 30 * time.Second

	// DefaultHeartbeat is the AMQP heartbeat Run asks for. The broker
	// takes a peer that sent nothing for about two heartbeats for dead
	// and requeues its unacknowledged messages; a killed process's
	// connection is closed by its kernel at once.
	DefaultHeartbeat = 10 * time.Second
)

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	switch {
	case out.Prefetch < 0 || out.Prefetch > 65535:
		return out, fmt.Errorf("amqpinbox: Config.Prefetch must be between 0 and 65535, got %d", out.Prefetch)
	case out.Concurrency < 0:
		return out, fmt.Errorf("amqpinbox: Config.Concurrency must not be negative, got %d", out.Concurrency)
	case out.RetryDelay < 0:
		return out, fmt.Errorf("amqpinbox: Config.RetryDelay must not be negative, got %s", out.RetryDelay)
	case out.MaxRetryDelay < 0:
		return out, fmt.Errorf("amqpinbox: Config.MaxRetryDelay must not be negative, got %s", out.MaxRetryDelay)
	case out.AMQP.Recovery != nil:
		return out, errors.New("amqpinbox: Config.AMQP.Recovery must be nil: Run reconnects by itself, and a delivery must be settled on the channel that received it")
	case out.AMQP.Heartbeat < 0:
		return out, fmt.Errorf("amqpinbox: Config.AMQP.Heartbeat must not be negative, got %s", out.AMQP.Heartbeat)
	}
	if out.Concurrency == 0 {
		out.Concurrency = 1
	}
	if out.Prefetch == 0 {
		out.Prefetch = min(max(DefaultPrefetch, 2*out.Concurrency), 65535)
	}
	if out.Concurrency > out.Prefetch {
		return out, fmt.Errorf("amqpinbox: Config.Concurrency (%d) must not exceed Config.Prefetch (%d): the extra workers would never get a delivery", out.Concurrency, out.Prefetch)
	}
	if out.RetryDelay == 0 {
		out.RetryDelay = DefaultRetryDelay
	}
	if out.MaxRetryDelay == 0 {
		out.MaxRetryDelay = max(DefaultMaxRetryDelay, out.RetryDelay)
	}
	if out.MaxRetryDelay < out.RetryDelay {
		return out, fmt.Errorf("amqpinbox: Config.MaxRetryDelay (%s) must not be less than Config.RetryDelay (%s)", out.MaxRetryDelay, out.RetryDelay)
	}
	if out.AMQP.Heartbeat == 0 {
		out.AMQP.Heartbeat = DefaultHeartbeat
	}
	return out, nil
}

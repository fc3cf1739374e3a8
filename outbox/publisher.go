package outbox

import (
	"context"
	"errors"
	"fmt"
)

// Publisher sends messages to a broker. Publish returns nil only once the
// broker has confirmed that it holds e (a JetStream PubAck, an AMQP
// publisher confirm). It sends e.ID as the broker's message id. An error
// that matches ErrRefused is the broker refusing this message, which the
// relay counts toward parking it; any other error is a failure of the
// broker or the connection, retried without counting.
type Publisher interface {
	Publish(ctx context.Context, e Envelope) error
}

// BatchPublisher is implemented by publishers that can have several
// messages in flight: PublishBatch sends es in order and waits for every
// confirmation, and returns one error per message (nil for confirmed).
// The relay uses it when the publisher has it.
type BatchPublisher interface {
	Publisher
	PublishBatch(ctx context.Context, es []Envelope) []error
}

// ErrRefused is matched by the errors of a broker refusing a message (an
// unroutable message returned, a negative confirm, a message too large).
var ErrRefused = errors.New("outbox: the broker refused the message")

// Refused returns err marked as a refusal: it matches ErrRefused and err.
func Refused(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrRefused, err)
}

// Sequential returns p without its PublishBatch, if it has one: the relay
// then publishes one message at a time, each confirmed before the next is
// sent, so that a failed message is never overtaken on the broker by a
// later message of its partition key (docs/OUTBOX.md, Order). It costs
// the publish rate.
func Sequential(p Publisher) Publisher { return sequential{p} }

type sequential struct{ p Publisher }

func (s sequential) Publish(ctx context.Context, e Envelope) error { return s.p.Publish(ctx, e) }

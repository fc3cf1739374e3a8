package amqpinbox

import (
	"errors"
	"fmt"
	"maps"

	amqp "github.com/rabbitmq/amqp091-go"
)

// DeclareQueue makes sure a durable queue named name exists on conn's
// vhost. A queue that exists is used as it is, whatever its type and
// arguments: DeclareQueue looks first (a passive declare) and never fails
// because its own arguments differ from those of a queue declared
// elsewhere, by an operator or a policy. A queue that does not exist is
// declared durable with args, as a quorum queue unless args set
// x-queue-type: a quorum queue counts deliveries (x-delivery-count), so
// Message.Attempt is exact. It reports whether it declared the queue.
//
// Each step uses a channel of its own, since a failed declare closes its
// channel.
func DeclareQueue(conn *amqp.Connection, name string, args amqp.Table) (declared bool, err error) {
	if name == "" {
		return false, errors.New("amqpinbox: DeclareQueue: the queue name is empty (the broker would make one up)")
	}
	a := amqp.Table{"x-queue-type": amqp.QueueTypeQuorum}
	maps.Copy(a, args)
	// Twice at most: a queue declared by someone else between our look
	// and our declare is found by the second look.
	for range 2 {
		exists, err := queueExists(conn, name)
		if err != nil || exists {
			return false, err
		}
		ch, err := conn.Channel()
		if err != nil {
			return false, fmt.Errorf("amqpinbox: DeclareQueue %q: %w", name, err)
		}
		_, err = ch.QueueDeclare(name, true, false, false, false, a)
		if err == nil {
			_ = ch.Close()
			return true, nil
		}
		if !isAMQPError(err, amqp.PreconditionFailed) {
			return false, fmt.Errorf("amqpinbox: DeclareQueue %q: %w", name, err)
		}
	}
	return false, fmt.Errorf("amqpinbox: DeclareQueue %q: declared elsewhere with other arguments, yet not found", name)
}

// queueExists looks name up with a passive declare.
func queueExists(conn *amqp.Connection, name string) (bool, error) {
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("amqpinbox: DeclareQueue %q: %w", name, err)
	}
	_, err = ch.QueueDeclarePassive(name, true, false, false, false, nil)
	switch {
	case err == nil:
		_ = ch.Close()
		return true, nil
	case isAMQPError(err, amqp.NotFound):
		return false, nil // the broker closed the channel
	default:
		return false, fmt.Errorf("amqpinbox: DeclareQueue %q: %w", name, err)
	}
}

func isAMQPError(err error, code int) bool {
	var e *amqp.Error
	return errors.As(err, &e) && e.Code == code
}

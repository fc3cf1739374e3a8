package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/idemkit/idem/inbox/amqpinbox"
	amqp "github.com/rabbitmq/amqp091-go"
)

// consumeAMQPHeartbeat is the AMQP heartbeat of idem serve -consume
// amqp://. A killed idem serve's connection is closed by its kernel, and
// RabbitMQ requeues its unacknowledged messages at once; a process that
// hangs or a host that vanishes sends nothing, and RabbitMQ takes its
// connection for dead after about two heartbeats without traffic, so
// within 5 s at 2 s.
const consumeAMQPHeartbeat = time.Second

func init() {
	consumeSources["amqp"] = consumeAMQP
	consumeSources["amqps"] = consumeAMQP
}

// consumeAMQP consumes transfer commands from the queue p.Queue (by
// default "transfers") on the vhost of the AMQP URI p.URL, with the
// message_id property as the message id. It makes sure the queue exists
// before it returns, and again on every connection run opens (see
// declareTransfers); it fails when the broker cannot be reached then.
func consumeAMQP(ctx context.Context, p consumeParams) (func(context.Context) error, error) {
	if _, err := amqp.ParseURI(p.URL); err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it quotes the URL, password and all
		}
		return nil, fmt.Errorf("bad AMQP URL: %w", err)
	}
	queue := cmp.Or(p.Queue, "transfers")
	conf := amqp.Config{
		Heartbeat:  consumeAMQPHeartbeat,
		Properties: amqp.Table{"connection_name": "idem serve " + queue},
	}
	c, err := amqpinbox.New(p.Inbox, p.Handler, &amqpinbox.Config{
		Concurrency: 4,
		AMQP:        conf,
		Setup: func(_ context.Context, conn *amqp.Connection) error {
			_, err := declareTransfers(conn, queue)
			return err
		},
		Logger: p.Logger,
	})
	if err != nil {
		return nil, err
	}

	// The queue exists before idem serve listens.
	conf.Dial = func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: consumeAMQPDialTimeout}
		nc, err := d.DialContext(ctx, network, addr)
		if err == nil {
			err = nc.SetDeadline(time.Now().Add(consumeAMQPDialTimeout)) // amqp091 lifts it after the handshake
		}
		return nc, err
	}
	conn, err := amqp.DialConfig(p.URL, conf)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	declared, err := declareTransfers(conn, queue)
	if err != nil {
		return nil, err
	}
	if p.Logger != nil {
		p.Logger.Info("idem serve: RabbitMQ queue ready", "queue", queue, "declared", declared, "dead_letters", queue+amqpDeadSuffix)
	}
	return func(ctx context.Context) error { return c.Run(ctx, p.URL, queue) }, nil
}

// consumeAMQPDialTimeout bounds the first connection of idem serve
// -consume amqp://, handshake included.
const consumeAMQPDialTimeout = 10 * time.Second

// amqpDeadSuffix names the dead-letter queue of a queue idem serve declares.
const amqpDeadSuffix = ".dead"

// declareTransfers makes sure queue exists. An existing queue is used as it
// is, whatever its type and arguments (an operator's, or a policy's). A
// missing one is declared durable, as a quorum queue (whose
// x-delivery-count makes the attempt count exact), dead-lettering at least
// once to queue+".dead", declared too: messages without an id, with an id
// reused for another body, or failing MaxAttempts times are kept there for
// inspection rather than dropped. It reports whether it declared queue.
func declareTransfers(conn *amqp.Connection, queue string) (bool, error) {
	dead := queue + amqpDeadSuffix
	if _, err := amqpinbox.DeclareQueue(conn, dead, nil); err != nil {
		return false, err
	}
	return amqpinbox.DeclareQueue(conn, queue, amqp.Table{
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": dead,
		// At least once: a dead letter leaves the queue only once the
		// dead-letter queue holds it. RabbitMQ requires reject-publish
		// overflow for it (it matters only with a length limit).
		"x-dead-letter-strategy": "at-least-once",
		"x-overflow":             "reject-publish",
	})
}

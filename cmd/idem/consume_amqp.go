package main

import (
	"context"
	"errors"
	"fmt"
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
// default "transfers") on the vhost of the AMQP URI p.URL. On every
// connection it makes sure the queue exists: an existing queue is used as
// it is; a missing one is declared durable, as a quorum queue that
// dead-letters to "<queue>.dead" (declared too), so that messages without
// an id or failing for good are kept for inspection rather than dropped.
// The message id is the message_id property.
func consumeAMQP(_ context.Context, p consumeParams) (func(context.Context) error, error) {
	uri, err := amqp.ParseURI(p.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it quotes the URL, password and all
		}
		return nil, fmt.Errorf("-consume: bad AMQP URL: %w", err)
	}
	queue := p.Queue
	if queue == "" {
		queue = "transfers"
	}
	dead := queue + ".dead"
	c, err := amqpinbox.New(p.Inbox, p.Handler, &amqpinbox.Config{
		Concurrency: 4,
		AMQP: amqp.Config{
			Heartbeat:  consumeAMQPHeartbeat,
			Properties: amqp.Table{"connection_name": "idem serve " + queue},
		},
		Setup: func(_ context.Context, conn *amqp.Connection) error {
			if _, err := amqpinbox.DeclareQueue(conn, dead, nil); err != nil {
				return err
			}
			_, err := amqpinbox.DeclareQueue(conn, queue, amqp.Table{
				"x-dead-letter-exchange":    "",
				"x-dead-letter-routing-key": dead,
				// Dead-letter at least once: the message leaves the
				// queue only once the dead-letter queue holds it.
				"x-dead-letter-strategy": "at-least-once",
				"x-overflow":             "reject-publish",
			})
			return err
		},
		Logger: p.Logger,
	})
	if err != nil {
		return nil, err
	}
	if p.Logger != nil {
		uri.Password = "xxxxx"
		p.Logger.Info("idem serve: consuming transfers", "broker", uri.String(), "queue", queue, "dead_letters", dead)
	}
	return func(ctx context.Context) error { return c.Run(ctx, p.URL, queue) }, nil
}

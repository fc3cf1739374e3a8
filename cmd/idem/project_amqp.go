package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/amqpinbox"
	amqp "github.com/rabbitmq/amqp091-go"
)

// projectAMQP consumes the events from the quorum queue n.Queue (with its
// dead-letter queue, as idem serve -consume declares its own), bound to
// the durable fanout exchange n.Exchange; both are declared before it
// returns and on every connection.
func projectAMQP(ctx context.Context, rawURL string, n eventNames, ib *inbox.Inbox, h inbox.Handler, log *slog.Logger) (func(context.Context) error, error) {
	if _, err := amqp.ParseURI(rawURL); err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("bad AMQP URL: %w", err)
	}
	conf := amqp.Config{
		Heartbeat:  consumeAMQPHeartbeat,
		Properties: amqp.Table{"connection_name": "idem project " + n.Queue},
	}
	setup := func(conn *amqp.Connection) error {
		if err := declareEventExchange(conn, n); err != nil {
			return err
		}
		if _, err := declareTransfers(conn, n.Queue); err != nil {
			return err
		}
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		defer ch.Close()
		if err := ch.QueueBind(n.Queue, "", n.Exchange, false, nil); err != nil {
			return fmt.Errorf("bind queue %s to exchange %s: %w", n.Queue, n.Exchange, err)
		}
		return nil
	}
	c, err := amqpinbox.New(ib, h, &amqpinbox.Config{
		Concurrency: 4,
		AMQP:        conf,
		Setup:       func(_ context.Context, conn *amqp.Connection) error { return setup(conn) },
		Logger:      log,
	})
	if err != nil {
		return nil, err
	}
	conf.Dial = func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: consumeAMQPDialTimeout}
		nc, err := d.DialContext(ctx, network, addr)
		if err == nil {
			err = nc.SetDeadline(time.Now().Add(consumeAMQPDialTimeout))
		}
		return nc, err
	}
	conn, err := amqp.DialConfig(rawURL, conf)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	if err := setup(conn); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return c.Run(ctx, rawURL, n.Queue) }, nil
}

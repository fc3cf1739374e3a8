package amqpinbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	neturl "net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Reconnection backoff of Run: the first wait, and the longest.
const (
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 5 * time.Second
)

// dialTimeout bounds the TCP connect and the AMQP handshake of Run's
// default dialer.
const dialTimeout = 30 * time.Second

// Run consumes queue at the broker url (amqp:// or amqps://, whose path
// is the vhost) until ctx ends, and returns nil then. It dials, runs
// Config.Setup, opens a channel and consumes as Consume does; when the
// connection or the consumer is lost, or any of these steps fails, it
// logs why and starts again after a backoff (0.1 s doubling to 5 s, with
// jitter). The broker requeues what the lost connection had not settled.
func (c *Consumer) Run(ctx context.Context, url, queue string) error {
	if _, err := parseURL(url); err != nil {
		return fmt.Errorf("amqpinbox: Run: %w", err)
	}
	delay := reconnectMin
	for {
		start := time.Now()
		err := c.session(ctx, url, queue)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > reconnectMax {
			delay = reconnectMin // it ran a while: start the backoff afresh
		}
		wait := delay - time.Duration(rand.Int64N(int64(delay/2)))
		if l := c.cfg.Logger; l != nil {
			l.WarnContext(ctx, "amqpinbox: not consuming; connecting again", "queue", queue, "error", err, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		delay = min(2*delay, reconnectMax)
	}
}

// parseURL parses an AMQP URI. Its error never shows the URL, which may
// hold a password.
func parseURL(url string) (amqp.URI, error) {
	uri, err := amqp.ParseURI(url)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // it quotes the URL
		}
		return amqp.URI{}, fmt.Errorf("bad broker URL: %w", err)
	}
	return uri, nil
}

// session runs one connection: dial, set up, consume until it is lost or
// ctx ends.
func (c *Consumer) session(ctx context.Context, url, queue string) error {
	conn, err := c.dial(ctx, url)
	if err != nil {
		return fmt.Errorf("amqpinbox: connect: %w", err)
	}
	defer func() { _ = conn.CloseDeadline(time.Now().Add(5 * time.Second)) }()
	if c.cfg.Setup != nil {
		if err := c.cfg.Setup(ctx, conn); err != nil {
			return fmt.Errorf("amqpinbox: Config.Setup: %w", err)
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("amqpinbox: open a channel: %w", err)
	}
	if l := c.cfg.Logger; l != nil {
		l.InfoContext(ctx, "amqpinbox: consuming", "queue", queue, "server", conn.RemoteAddr().String())
	}
	return c.Consume(ctx, ch, queue)
}

// dial connects to url with Config.AMQP. Its default dialer gives up after
// dialTimeout or when ctx ends, handshake included.
func (c *Consumer) dial(ctx context.Context, url string) (*amqp.Connection, error) {
	cfg := c.cfg.AMQP
	var stop func() bool
	if cfg.Dial == nil {
		cfg.Dial = func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: dialTimeout}
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// amqp091 lifts the deadline once the handshake is done.
			if err := nc.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
				nc.Close()
				return nil, err
			}
			stop = context.AfterFunc(ctx, func() { nc.Close() })
			return nc, nil
		}
	}
	conn, err := amqp.DialConfig(url, cfg)
	if stop != nil {
		stop()
	}
	return conn, err
}

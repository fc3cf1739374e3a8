// Package amqptest is the RabbitMQ plumbing the module's tests share:
// which broker they use, what happens when it is missing, and queues and
// exchanges with unique names that are deleted at clean-up.
//
// The broker is the one at IDEM_AMQP_URL, or [DefaultURL]. When it cannot
// be reached, tests that need it are skipped, except under CI=true, where
// a missing broker fails them: CI must never pass by skipping.
package amqptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem/internal/servertest"
)

// DefaultURL is the broker the tests use when IDEM_AMQP_URL is not set.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

var server = &servertest.Server{
	Name: "RabbitMQ", Env: "IDEM_AMQP_URL", Default: DefaultURL, Hint: "start the broker", Redact: redact,
	Ping: func(ctx context.Context, u string) error {
		deadline, _ := ctx.Deadline() // amqp091 dials without a context
		conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(time.Until(deadline))})
		if err != nil {
			return err
		}
		return conn.Close()
	},
}

// URL returns IDEM_AMQP_URL, or DefaultURL when it is not set.
func URL() string { return server.Addr() }

// Require returns URL() when the broker answers. When it does not,
// Require skips the test, or fails it under CI=true. The broker is tried
// once per test binary; every later call gives the same verdict.
func Require(t testing.TB) string {
	t.Helper()
	return server.Require(t)
}

// Dial calls Require and returns a connection to the broker, closed at
// clean-up.
func Dial(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(Require(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Channel returns a channel of a new connection (see Dial).
func Channel(t testing.TB) *amqp.Channel {
	t.Helper()
	ch, err := Dial(t).Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// Name returns a name no other test uses, starting with prefix, and
// deletes the queue and the exchange of that name, if they exist by
// then, at clean-up.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	u := Require(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "idem-test-" + prefix + "-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { Delete(t, u, name) })
	return name
}

// Delete deletes the queue and the exchange named name from the broker at
// url, if they exist, logging any failure.
func Delete(t testing.TB, url, name string) {
	t.Helper()
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Logf("delete %s: %v", name, err)
		return
	}
	defer conn.Close()
	for _, del := range []func(*amqp.Channel) error{
		func(ch *amqp.Channel) error { _, err := ch.QueueDelete(name, false, false, false); return err },
		func(ch *amqp.Channel) error { return ch.ExchangeDelete(name, false, false) },
	} {
		ch, err := conn.Channel()
		if err != nil {
			t.Logf("delete %s: %v", name, err)
			return
		}
		if err := del(ch); err != nil {
			t.Logf("delete %s: %v", name, err)
		}
		_ = ch.Close()
	}
}

// redact hides the password of an AMQP URL.
func redact(u string) string {
	uri, err := amqp.ParseURI(u)
	if err != nil {
		return "amqp://…"
	}
	if uri.Password != "" {
		uri.Password = "xxxxx"
	}
	return uri.String()
}

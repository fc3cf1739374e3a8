package amqpoutbox_test

import (
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idem/internal/amqptest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/amqpoutbox"
)

// TestPublishConfirmsWithTheMessageID publishes to a fanout exchange bound
// to a queue: the queue holds the message with its id as message-id,
// persistent, with its headers.
func TestPublishConfirmsWithTheMessageID(t *testing.T) {
	url := amqptest.Require(t)
	ex, q := amqptest.Name(t, "ex"), amqptest.Name(t, "q")
	setup := func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare(ex, "fanout", false, true, false, false, nil); err != nil {
			return err
		}
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			return err
		}
		return ch.QueueBind(q, "", ex, false, nil)
	}
	pub, err := amqpoutbox.New(&amqpoutbox.Config{URL: url, Exchange: ex, Setup: setup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pub.Close()
		amqptest.Delete(t, url, q)
	})
	e := outbox.Envelope{ID: "msg_amqp", Subject: "any", Body: []byte("b"), Headers: map[string]string{"X-A": "1"}}
	if err := pub.Publish(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	ch := amqptest.Channel(t)
	var d amqp.Delivery
	var ok bool
	for range 50 {
		if d, ok, err = ch.Get(q, true); err != nil || ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || !ok {
		t.Fatalf("the queue holds nothing after the confirm: %v", err)
	}
	if d.MessageId != e.ID || d.DeliveryMode != amqp.Persistent || d.Headers["X-A"] != "1" || string(d.Body) != "b" {
		t.Errorf("delivered %+v, want message-id %s, persistent, the header", d, e.ID)
	}
}

// TestUnroutableIsRefused publishes to an exchange with no binding: the
// returned message is a refusal, which the relay parks after MaxAttempts.
func TestUnroutableIsRefused(t *testing.T) {
	url := amqptest.Require(t)
	ex := amqptest.Name(t, "ex")
	pub, err := amqpoutbox.New(&amqpoutbox.Config{URL: url, Exchange: ex, Setup: func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(ex, "direct", false, true, false, false, nil)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	err = pub.Publish(t.Context(), outbox.Envelope{ID: "msg_nowhere", Subject: "nowhere"})
	if !errors.Is(err, outbox.ErrRefused) {
		t.Fatalf("an unroutable publish = %v, want a refusal", err)
	}
	// The publisher goes on after a return.
	if err := pub.Publish(t.Context(), outbox.Envelope{ID: "msg_nowhere2", Subject: "nowhere"}); !errors.Is(err, outbox.ErrRefused) {
		t.Fatalf("a second unroutable publish = %v, want a refusal", err)
	}
}

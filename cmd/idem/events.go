package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// defaultEvents is the default -events of idem serve, idem relay and idem
// project: the names of the transfer events' stream, subject, exchange and
// queue derive from it (see eventNames).
const defaultEvents = "transfers"

// eventNames are the broker objects of the transfer events.
type eventNames struct {
	Stream   string // NATS: the JetStream stream, "TRANSFERS_EVENTS"…
	Subject  string // NATS: the subject events are published on
	Exchange string // RabbitMQ: the durable fanout exchange
	Queue    string // RabbitMQ: idem project's quorum queue, bound to Exchange
	Durable  string // NATS: idem project's durable consumer
}

// eventsNamed returns the names derived from -events: for "transfers",
// stream TRANSFER_EVENTS and subject transfers.created (NATS), exchange
// transfers.events and queue transfers.projection (RabbitMQ).
func eventsNamed(events string) eventNames {
	stream := strings.ToUpper(events)
	if events == defaultEvents {
		stream = "TRANSFER" // TRANSFER_EVENTS, the documented name
	}
	return eventNames{
		Stream:   stream + "_EVENTS",
		Subject:  events + ".created",
		Exchange: events + ".events",
		Queue:    events + ".projection",
		Durable:  "idem-projection",
	}
}

// validEvents checks -events: it must be a name validQueueName accepts.
func validEvents(cmd, events string) error {
	if !validQueueName(events) {
		return usageError{fmt.Sprintf("%s: -events must be 1 to %d ASCII letters, digits, - and _, got %q", cmd, maxQueueName, events)}
	}
	return nil
}

// ensureEventStream returns the stream of the events, creating it if it
// is missing: file storage, the server's default duplicate window (2 min),
// which absorbs a relay's republishing of an event it published but had
// not marked sent. An existing stream is used as it is, if it captures the
// subject.
func ensureEventStream(ctx context.Context, js jetstream.JetStream, n eventNames) (jetstream.Stream, error) {
	for range 2 {
		s, err := js.Stream(ctx, n.Stream)
		if err == nil {
			for _, subj := range s.CachedInfo().Config.Subjects {
				if subj == n.Subject {
					return s, nil
				}
			}
			return nil, fmt.Errorf("stream %s exists but does not capture subject %s", n.Stream, n.Subject)
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("look up stream %s: %w", n.Stream, err)
		}
		s, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        n.Stream,
			Description: "idem serve -publish: transfer events",
			Subjects:    []string{n.Subject},
			Storage:     jetstream.FileStorage,
		})
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("create stream %s: %w", n.Stream, err)
		}
		// Created meanwhile by another process: look again.
	}
	return nil, fmt.Errorf("stream %s: created and not found", n.Stream)
}

// declareEventExchange declares the durable fanout exchange of the events
// (a declare with the same arguments is a no-op).
func declareEventExchange(conn *amqp.Connection, n eventNames) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.ExchangeDeclare(n.Exchange, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", n.Exchange, err)
	}
	return nil
}

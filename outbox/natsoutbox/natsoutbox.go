// Package natsoutbox is the outbox.Publisher for NATS JetStream: each
// message is published with its id as Nats-Msg-Id, so that the stream's
// duplicate window drops a republished copy, and the publish returns only
// once the stream's PubAck is in.
//
//	pub, err := natsoutbox.New(js, &natsoutbox.Config{Stream: "TRANSFER_EVENTS"})
//	relay := outbox.NewRelay(store.Outbox(), pub, nil)
//
// A batch waits for its PubAcks at most Config.AckTimeout; nats.go keeps an
// unanswered asynchronous publish pending until its own timeout, so create
// js with jetstream.WithPublishAsyncTimeout where the server may vanish
// mid-batch.
package natsoutbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem/outbox"
)

// Config configures a Publisher. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Stream, when set, is the stream that must store the messages
	// (Nats-Expected-Stream): a publish that another stream, or none,
	// would capture fails instead of being acknowledged by the wrong one.
	Stream string
	// Subject is the subject of the messages whose Subject is empty.
	Subject string
	// AckTimeout bounds the wait for a PubAck (a server that went away
	// mid-publish never sends one). Defaults to 5 seconds.
	AckTimeout time.Duration
}

// DefaultAckTimeout is Config.AckTimeout's default.
const DefaultAckTimeout = 5 * time.Second

// Publisher publishes envelopes to JetStream. It implements
// outbox.BatchPublisher: a batch is published asynchronously, in order,
// and each message waits for its own PubAck.
type Publisher struct {
	js  jetstream.JetStream
	cfg Config
}

var _ outbox.BatchPublisher = (*Publisher)(nil)

// New returns a Publisher through js. A nil cfg means defaults.
func New(js jetstream.JetStream, cfg *Config) (*Publisher, error) {
	if js == nil {
		return nil, errors.New("natsoutbox: New: the JetStream is nil")
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.AckTimeout < 0 {
		return nil, fmt.Errorf("natsoutbox: Config.AckTimeout must not be negative, got %s", c.AckTimeout)
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	return &Publisher{js: js, cfg: c}, nil
}

func (p *Publisher) msg(e outbox.Envelope) (*nats.Msg, []jetstream.PublishOpt, error) {
	subject := e.Subject
	if subject == "" {
		subject = p.cfg.Subject
	}
	if subject == "" {
		return nil, nil, outbox.Refused(fmt.Errorf("natsoutbox: message %s has no subject and Config.Subject is empty", e.ID))
	}
	m := nats.NewMsg(subject)
	m.Data = e.Body
	for k, v := range e.Headers {
		m.Header.Set(k, v)
	}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(e.ID)}
	if p.cfg.Stream != "" {
		opts = append(opts, jetstream.WithExpectStream(p.cfg.Stream))
	}
	return m, opts, nil
}

// Publish implements outbox.Publisher: it returns nil once the stream has
// acknowledged the message (a duplicate within the stream's window is
// acknowledged too).
func (p *Publisher) Publish(ctx context.Context, e outbox.Envelope) error {
	m, opts, err := p.msg(e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	defer cancel()
	_, err = p.js.PublishMsg(ctx, m, opts...)
	return classify(e.ID, err)
}

// PublishBatch implements outbox.BatchPublisher.
func (p *Publisher) PublishBatch(ctx context.Context, es []outbox.Envelope) []error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	defer cancel()
	errs := make([]error, len(es))
	futures := make([]jetstream.PubAckFuture, len(es))
	for i, e := range es {
		m, opts, err := p.msg(e)
		if err != nil {
			errs[i] = err
			continue
		}
		f, err := p.js.PublishMsgAsync(m, opts...)
		if err != nil {
			errs[i] = classify(e.ID, err)
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			errs[i] = classify(es[i].ID, err)
		case <-ctx.Done():
			errs[i] = fmt.Errorf("natsoutbox: message %s: no PubAck: %w", es[i].ID, ctx.Err())
		}
	}
	return errs
}

// classify marks as refusals the errors that say this message can never
// be stored as it is: larger than the server or the stream allow.
func classify(id string, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("natsoutbox: message %s: %w", id, err)
	var api *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return outbox.Refused(err)
	case errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return outbox.Refused(err)
	}
	return err
}

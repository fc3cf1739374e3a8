package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func init() { consumeSources["nats"] = consumeNATS }

// How idem serve -consume nats://… consumes.
const (
	// natsAckWait is the consumer's AckWait: the messages a killed
	// consumer had taken and not acknowledged are delivered again this
	// long after it last reported them (within 5 s of the kill). The
	// adapter reports the message being handled in progress every third
	// of it, so a longer transfer keeps its message; buffered messages
	// are few (natsPrefetch) and quick.
	natsAckWait = 3 * time.Second
	// natsPrefetch is how many messages the consumer takes ahead of the
	// one being handled.
	natsPrefetch = 8
	// natsSetupTimeout bounds the connection and the stream and consumer
	// set-up at start.
	natsSetupTimeout = 10 * time.Second
)

// consumeNATS connects to the NATS server or cluster of p.URL (a URL, or
// a comma-separated list of them), makes sure a JetStream stream captures
// the subject p.Queue (the one that does, else a new stream named after
// the subject in upper case with the server's defaults, its 2 min
// duplicate window included), and the durable consumer "idem-<queue>" on
// it, and returns the loop that applies its messages through the inbox.
// The connection reconnects for ever; a stream replicated over a cluster
// keeps being consumed when a node is lost.
func consumeNATS(ctx context.Context, p consumeParams) (func(context.Context) error, error) {
	log := p.Logger
	nc, err := nats.Connect(p.URL,
		nats.Name("idem serve"),
		nats.Timeout(natsSetupTimeout/2),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if log != nil && err != nil {
				log.Warn("idem serve: lost the NATS server; reconnecting", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			if log != nil {
				log.Info("idem serve: reconnected to NATS", "server", redactURL(nc.ConnectedUrl()))
			}
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	cons, err := natsConsumer(ctx, nc, p.Queue)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cfg := &natsinbox.Config{Prefetch: natsPrefetch, Logger: log}
	return func(ctx context.Context) error {
		defer func() {
			// The acks of the last messages are on their way out.
			_ = nc.FlushTimeout(2 * time.Second)
			nc.Close()
		}()
		return natsinbox.Consume(ctx, cons, p.Inbox, p.Handler, cfg)
	}, nil
}

// natsConsumer returns the durable consumer of subject, creating the
// stream and the consumer as needed.
func natsConsumer(ctx context.Context, nc *nats.Conn, subject string) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, natsSetupTimeout)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	stream, err := natsStream(ctx, js, subject)
	if err != nil {
		return nil, err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       "idem-" + subject,
		Description:   "idem serve: transfer commands, applied once through the inbox",
		FilterSubject: subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       natsAckWait,
		MaxDeliver:    -1, // the inbox dead-letters (Term) after its MaxAttempts
	})
	if err != nil {
		return nil, fmt.Errorf("create or update the consumer idem-%s on stream %s: %w", subject, stream.CachedInfo().Config.Name, err)
	}
	return cons, nil
}

// natsStream returns the stream that captures subject, creating it if
// none does. An existing stream is used as it is.
func natsStream(ctx context.Context, js jetstream.JetStream, subject string) (jetstream.Stream, error) {
	for range 2 {
		name, err := js.StreamNameBySubject(ctx, subject)
		switch {
		case err == nil:
			return js.Stream(ctx, name)
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return nil, fmt.Errorf("look up the stream of subject %s: %w", subject, err)
		}
		name = strings.ToUpper(subject)
		stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        name,
			Description: "idem serve: transfer commands",
			Subjects:    []string{subject},
		})
		if err == nil {
			return stream, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("create stream %s on subject %s: %w", name, subject, err)
		}
		// Another instance created it meanwhile (or a stream of that
		// name captures other subjects): look again.
	}
	return nil, fmt.Errorf("a stream named %s exists but does not capture subject %s; create a stream that does, or choose another -consume-queue", strings.ToUpper(subject), subject)
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// projectNATS consumes the events with the durable consumer n.Durable on
// the stream n.Stream (created if missing, as idem serve -publish creates
// it), with the same acknowledgement settings as idem serve -consume.
func projectNATS(ctx context.Context, url string, n eventNames, ib *inbox.Inbox, h inbox.Handler, log *slog.Logger) (func(context.Context) error, error) {
	nc, err := nats.Connect(url,
		nats.Name("idem project"),
		nats.Timeout(natsSetupTimeout/2),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	cons, err := projectConsumer(ctx, nc, n)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cfg := &natsinbox.Config{Prefetch: natsPrefetch, Logger: log}
	return func(ctx context.Context) error {
		defer func() {
			_ = nc.FlushTimeout(2 * time.Second)
			nc.Close()
		}()
		return natsinbox.Consume(ctx, cons, ib, h, cfg)
	}, nil
}

func projectConsumer(ctx context.Context, nc *nats.Conn, n eventNames) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, natsSetupTimeout)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	stream, err := ensureEventStream(ctx, js, n)
	if err != nil {
		return nil, err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       n.Durable,
		Description:   "idem project: transfer events, applied once through the inbox",
		FilterSubject: n.Subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       natsAckWait,
		MaxDeliver:    -1, // the inbox dead-letters (Term) after its MaxAttempts
	})
	if err != nil {
		return nil, fmt.Errorf("create or update the consumer %s on stream %s: %w", n.Durable, n.Stream, err)
	}
	return cons, nil
}

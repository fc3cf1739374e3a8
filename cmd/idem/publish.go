package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemprom"
	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/amqpoutbox"
	"github.com/idemkit/idem/outbox/natsoutbox"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
)

// sqliteRelayPoll is the relay's poll interval on SQLite, which cannot
// wake it on a commit (PostgreSQL's relay waits on LISTEN/NOTIFY).
const sqliteRelayPoll = 50 * time.Millisecond

// validPublish checks a -publish URL: nats://… or amqp(s)://….
func validPublish(cmd, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return usageError{fmt.Sprintf("%s: -publish must be a broker URL such as nats://127.0.0.1:4222 or amqp://guest:guest@127.0.0.1:5672/, got %q", cmd, redactURL(raw))}
	}
	switch strings.ToLower(u.Scheme) {
	case "nats", "amqp", "amqps":
		return nil
	}
	return usageError{fmt.Sprintf("%s: -publish: unknown scheme %q (supported schemes: amqp, amqps, nats)", cmd, u.Scheme)}
}

// outboxSource returns the outbox of the store idem serve records its keys
// in, and the relay's poll interval there.
func outboxSource(store idem.Store) (outbox.Source, time.Duration, error) {
	switch s := store.(type) {
	case *pgstore.Store:
		return s.Outbox(), 0, nil
	case *sqlitestore.Store:
		return s.Outbox(), sqliteRelayPoll, nil
	case *mysqlstore.Store:
		// MySQL has no LISTEN/NOTIFY either: the relay polls.
		return s.Outbox(), sqliteRelayPoll, nil
	}
	return nil, 0, fmt.Errorf("the store %T has no outbox", store)
}

// eventPublisher connects the publisher of the transfer events: on NATS,
// to the stream n.Stream (created if missing) on subject n.Subject; on
// RabbitMQ, to the durable fanout exchange n.Exchange (declared on every
// channel). close releases the connection.
func eventPublisher(ctx context.Context, raw string, n eventNames, log *slog.Logger) (pub outbox.Publisher, closeFn func(), err error) {
	u, _ := url.Parse(raw)
	if strings.EqualFold(u.Scheme, "nats") {
		nc, err := nats.Connect(raw,
			nats.Name("idem relay"),
			nats.Timeout(natsSetupTimeout/2),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(250*time.Millisecond),
		)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to NATS: %w", err)
		}
		js, err := jetstream.New(nc)
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, natsSetupTimeout)
			_, err = ensureEventStream(sctx, js, n)
			cancel()
		}
		if err == nil {
			pub, err = natsoutbox.New(js, &natsoutbox.Config{Stream: n.Stream, Subject: n.Subject})
		}
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return pub, func() { _ = nc.FlushTimeout(2 * time.Second); nc.Close() }, nil
	}
	p, err := amqpoutbox.New(&amqpoutbox.Config{
		URL:      raw,
		Exchange: n.Exchange,
		Setup: func(ch *amqp.Channel) error {
			return ch.ExchangeDeclare(n.Exchange, amqp.ExchangeFanout, true, false, false, false, nil)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return p, func() { _ = p.Close() }, nil
}

// startRelay runs the relay of the store's outbox to the -publish broker
// until ctx ends or stop is called; stop waits for it. The relay's
// metrics are registered on reg.
func startRelay(ctx context.Context, store idem.Store, raw string, n eventNames, reg prometheus.Registerer, log *slog.Logger) (stop func(), err error) {
	src, poll, err := outboxSource(store)
	if err != nil {
		return nil, err
	}
	pub, closePub, err := eventPublisher(ctx, raw, n, log)
	if err != nil {
		return nil, fmt.Errorf("-publish %s: %w", redactURL(raw), err)
	}
	r := outbox.NewRelay(src, pub, &outbox.RelayConfig{PollInterval: poll, Logger: log})
	col, err := idemprom.NewOutboxCollector(r, nil)
	if err == nil {
		err = reg.Register(col)
	}
	if err != nil {
		closePub()
		return nil, fmt.Errorf("the relay's metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("idem: the relay stopped", "err", err)
		}
	}()
	log.Info("idem: relaying transfer events", "publish", redactURL(raw), "stream", n.Stream, "subject", n.Subject, "exchange", n.Exchange)
	return func() {
		cancel()
		<-done
		closePub()
		if c, ok := src.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}, nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
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
	case "nats":
		return nil
	case "amqp", "amqps":
		return validAMQP(cmd, "-publish", raw)
	}
	return usageError{fmt.Sprintf("%s: -publish: unknown scheme %q (supported schemes: amqp, amqps, nats)", cmd, u.Scheme)}
}

// validAMQP checks what amqp091 reads from an AMQP URL (its heartbeat,
// connection_timeout, channel_max parameters), so that a typo in them
// fails at start rather than on every connection.
func validAMQP(cmd, flag, raw string) error {
	if _, err := amqp.ParseURI(raw); err != nil {
		return usageError{fmt.Sprintf("%s: %s %s: %v", cmd, flag, redactURL(raw), err)}
	}
	return nil
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
//
// A broker that cannot be reached is no reason not to start: transfers
// stage their events meanwhile, and the relay publishes them once it
// connects (logged as a warning). A broker that refuses the credentials,
// or a stream that does not capture the subject, is a configuration error,
// returned at once.
func eventPublisher(ctx context.Context, raw string, n eventNames, log *slog.Logger) (pub outbox.Publisher, closeFn func(), err error) {
	u, _ := url.Parse(raw)
	if strings.EqualFold(u.Scheme, "nats") {
		opts := []nats.Option{
			nats.Name("idem relay"),
			nats.Timeout(natsSetupTimeout / 2),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(250 * time.Millisecond),
		}
		nc, err := nats.Connect(raw, opts...)
		down := errors.Is(err, nats.ErrNoServers)
		if down {
			log.Warn("idem: NATS cannot be reached; the relay connects when it can, and transfers stage their events meanwhile", "publish", redactURL(raw), "err", err)
			nc, err = nats.Connect(raw, append(opts, nats.RetryOnFailedConnect(true))...)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("connect to NATS: %w", err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		p := &natsEventPublisher{js: js, n: n}
		if !down {
			if _, err := p.ready(ctx); err != nil {
				nc.Close()
				return nil, nil, err
			}
		}
		return p, func() { _ = nc.FlushTimeout(2 * time.Second); nc.Close() }, nil
	}
	if err := probeAMQP(raw, log); err != nil {
		return nil, nil, err
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

// probeAMQP connects to RabbitMQ once: a refusal of the credentials or of
// the virtual host is returned; a broker that cannot be reached is logged,
// and nil returned (amqpoutbox connects on each publish).
func probeAMQP(raw string, log *slog.Logger) error {
	conn, err := amqp.DialConfig(raw, amqp.Config{
		Properties: amqp.Table{"connection_name": "idem relay (probe)"},
		Dial:       amqp.DefaultDial(natsSetupTimeout / 2),
	})
	if err == nil {
		return conn.Close()
	}
	var ae *amqp.Error
	if errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrVhost) || errors.As(err, &ae) {
		return fmt.Errorf("RabbitMQ refused the connection: %w", err)
	}
	log.Warn("idem: RabbitMQ cannot be reached; the relay connects when it can, and transfers stage their events meanwhile", "publish", redactURL(raw), "err", err)
	return nil
}

// natsEventPublisher publishes to the events' stream, which it sets up
// (ensureEventStream) before its first publish, and again after a setup
// that failed: started while NATS was down, it is set up once NATS is
// back.
type natsEventPublisher struct {
	js jetstream.JetStream
	n  eventNames

	mu  sync.Mutex
	pub *natsoutbox.Publisher // nil until set up
}

func (p *natsEventPublisher) ready(ctx context.Context) (*natsoutbox.Publisher, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pub != nil {
		return p.pub, nil
	}
	sctx, cancel := context.WithTimeout(ctx, natsSetupTimeout)
	defer cancel()
	if _, err := ensureEventStream(sctx, p.js, p.n); err != nil {
		return nil, err
	}
	pub, err := natsoutbox.New(p.js, &natsoutbox.Config{Stream: p.n.Stream, Subject: p.n.Subject})
	if err != nil {
		return nil, err
	}
	p.pub = pub
	return pub, nil
}

// Publish implements outbox.Publisher.
func (p *natsEventPublisher) Publish(ctx context.Context, e outbox.Envelope) error {
	pub, err := p.ready(ctx)
	if err != nil {
		return err
	}
	return pub.Publish(ctx, e)
}

// PublishBatch implements outbox.BatchPublisher.
func (p *natsEventPublisher) PublishBatch(ctx context.Context, es []outbox.Envelope) []error {
	pub, err := p.ready(ctx)
	if err != nil {
		errs := make([]error, len(es))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return pub.PublishBatch(ctx, es)
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

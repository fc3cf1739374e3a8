package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/projection"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const projectSynopsis = `project -consume URL [-db projection.db | postgres://… | mysql://…] [-addr 127.0.0.1:8081] [-events transfers] [-consume-ttl 168h]

project runs a downstream read model of the transfers service: it consumes
the transfer events idem serve -publish announces, applies each event id once
through an inbox, in one transaction with the read model, and keeps
per-account totals. It serves GET /applied ({"count","transfer_ids"}: one
entry per event applied), GET /accounts/{id} ({"id","debits","credits"}),
GET /healthz and GET /metrics (idem_inbox_messages_total{consumer="projection"}).

NATS (nats://…): the durable consumer idem-projection on the stream
TRANSFER_EVENTS, subject transfers.created. RabbitMQ (amqp://…): the durable
quorum queue transfers.projection, bound to the durable fanout exchange
transfers.events. -events renames them all (see docs/PROJECTION.md).`

// defaultProjectionDB is the SQLite file of idem project without -db.
const defaultProjectionDB = "projection.db"

// projectionInbox names the inbox of idem project's event ids.
const projectionInbox = "projection"

type projectCommand struct {
	*Main
}

type projectOptions struct {
	commandLine
	consume, db, addr, events string
	consumeTTL                time.Duration

	// Set by validate.
	source projectSource
}

func (o *projectOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.consume, "consume", "", "the broker URL of the transfer events: nats://host:4222 (JetStream) or amqp://user:pass@host:5672/vhost (RabbitMQ); required")
	fs.StringVar(&o.db, "db", defaultProjectionDB, "the read model's database and its inbox: a SQLite file path, a postgres:// URL or a mysql:// URL")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8081", "listen address")
	fs.StringVar(&o.events, "events", defaultEvents, "the name the events' stream, subject, exchange and queue derive from (as in idem serve -publish); 1 to 64 ASCII letters, digits, - and _")
	fs.DurationVar(&o.consumeTTL, "consume-ttl", inbox.DefaultTTL, "how long an event id is remembered; a duplicate arriving later is applied again")
}

func (o *projectOptions) validate() error {
	if err := o.noArgs("project"); err != nil {
		return err
	}
	if o.consume == "" {
		return usageError{"project: -consume URL is required (nats://… or amqp://…)"}
	}
	if o.consumeTTL <= 0 {
		return usageError{fmt.Sprintf("project: -consume-ttl must be positive, got %s", o.consumeTTL)}
	}
	if isRedis(o.db) {
		return usageError{"project: -db must be a SQLite file path, a postgres:// URL or a mysql:// URL: the read model commits with its inbox records"}
	}
	if err := validEvents("project", o.events); err != nil {
		return err
	}
	u, err := url.Parse(o.consume)
	if err != nil || u.Host == "" {
		return usageError{fmt.Sprintf("project: -consume must be a broker URL such as nats://127.0.0.1:4222 or amqp://guest:guest@127.0.0.1:5672/, got %q", redactURL(o.consume))}
	}
	switch strings.ToLower(u.Scheme) {
	case "nats":
		o.source = projectNATS
	case "amqp", "amqps":
		if err := validAMQP("project", "-consume", o.consume); err != nil {
			return err
		}
		o.source = projectAMQP
	default:
		return usageError{fmt.Sprintf("project: -consume: unknown scheme %q (supported schemes: amqp, amqps, nats)", u.Scheme)}
	}
	return nil
}

// projectSource opens the consumer of the events; see consumeSource.
type projectSource func(ctx context.Context, url string, n eventNames, ib *inbox.Inbox, h inbox.Handler, log *slog.Logger) (run func(context.Context) error, err error)

// Run parses args, validates them and runs idem project.
func (c *projectCommand) Run(ctx context.Context, args []string) error {
	o := new(projectOptions)
	if err := c.parseOptions("project", projectSynopsis, flagsFirst, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *projectCommand) run(ctx context.Context, o *projectOptions) error {
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	b, err := openBackend(ctx, o.db, backendOptions{lockedHint: "another idem project uses this file"})
	if err != nil {
		return fmt.Errorf("project: %w", err)
	}
	defer closeWithin(b.close, 5*time.Second, log)
	var p *projection.Projection
	switch s := b.store.(type) {
	case *pgstore.Store:
		p = projection.Postgres(s)
	case *sqlitestore.Store:
		p = projection.SQLite(s)
	case *mysqlstore.Store:
		p = projection.MySQL(s)
	default:
		return fmt.Errorf("project: unsupported store %T", b.store)
	}
	if err := p.Migrate(ctx); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ib, err := inbox.New(b.store, &inbox.Config{Name: projectionInbox, TTL: o.consumeTTL, Logger: log, Observer: inboxMetrics(reg, projectionInbox)})
	if err != nil {
		return err
	}
	n := eventsNamed(o.events)
	run, err := o.source(ctx, o.consume, n, ib, p.Apply, log)
	if err != nil {
		return fmt.Errorf("project: -consume %s: %w", redactURL(o.consume), err)
	}
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	cons := startConsumer(consumeCtx, "idem project", run, log)
	// However run returns, the consumer is stopped, and waited for,
	// before the store closes (deferred above).
	defer func() {
		stopConsuming()
		cons.wait(10*time.Second, log)
	}()

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("project: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", p.Handler(log))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("idem project: listening", "addr", "http://"+ln.Addr().String(), "db", redact(o.db), "consume", redactURL(o.consume), "inbox", ib.Scope())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var failed error
	select {
	case err := <-errc:
		return err
	case <-cons.done:
		failed = fmt.Errorf("project: -consume: %w", cons.err)
	case <-ctx.Done():
		log.Info("idem project: shutting down")
	}
	stopConsuming()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		failed = errors.Join(failed, err)
	}
	return failed
}

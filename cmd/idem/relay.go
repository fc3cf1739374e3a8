package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const relaySynopsis = `relay -publish URL [-db idem.db | postgres://… | mysql://…] [-events transfers] [-addr 127.0.0.1:9465]

relay publishes the transfer events that idem serve -publish staged in -db's
outbox, as the relay inside idem serve does, and runs until SIGINT or
SIGTERM. On PostgreSQL several relays (and idem serve's) run at once; on
SQLite one relay per file holds it at a time (see docs/PROJECTION.md). With
-addr it serves GET /metrics (the outbox's: idem_outbox_*) and GET /healthz.`

type relayCommand struct {
	*Main
}

type relayOptions struct {
	commandLine
	db, publish, events, addr string
}

func (o *relayOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "the database of idem serve: a SQLite file path, a postgres:// URL or a mysql:// URL")
	fs.StringVar(&o.publish, "publish", "", "the broker URL to publish to: nats://host:4222 (JetStream) or amqp://user:pass@host:5672/vhost (RabbitMQ); required")
	fs.StringVar(&o.events, "events", defaultEvents, "the name the events' stream, subject and exchange derive from (as in idem serve -publish)")
	fs.StringVar(&o.addr, "addr", "", "serve GET /metrics and GET /healthz at this address (default: no HTTP listener)")
}

func (o *relayOptions) validate() error {
	if err := o.noArgs("relay"); err != nil {
		return err
	}
	if o.publish == "" {
		return usageError{"relay: -publish URL is required (nats://… or amqp://…)"}
	}
	if isRedis(o.db) {
		return usageError{"relay: -db must be the SQL database of idem serve (a SQLite file path, a postgres:// URL or a mysql:// URL): the outbox lives beside the ledger"}
	}
	if err := validEvents("relay", o.events); err != nil {
		return err
	}
	return validPublish("relay", o.publish)
}

// Run parses args, validates them and runs idem relay.
func (c *relayCommand) Run(ctx context.Context, args []string) error {
	o := new(relayOptions)
	if err := c.parseOptions("relay", relaySynopsis, flagsFirst, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	if err := sqliteExists("relay", o.db); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	b, err := openBackend(ctx, o.db, backendOptions{lockedHint: "another process holds the file"})
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer closeWithin(b.close, 5*time.Second, log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	stop, err := startRelay(ctx, b.store, o.publish, eventsNamed(o.events), reg, log)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer stop()
	if o.addr == "" {
		<-ctx.Done()
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return serveUntilDone(ctx, "relay", o.addr, mux, log)
}

// serveUntilDone serves h at addr until ctx ends, then shuts the server
// down within 10 seconds.
func serveUntilDone(ctx context.Context, cmd, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("idem "+cmd+": listening", "addr", "http://"+ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", cmd, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}

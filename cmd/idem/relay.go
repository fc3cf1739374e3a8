package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"
)

const relaySynopsis = `relay -publish URL [-db idem.db | postgres://… | mysql://…] [-events transfers]

relay publishes the transfer events that idem serve -publish staged in -db's
outbox, as the relay inside idem serve does, and runs until SIGINT or
SIGTERM. On PostgreSQL several relays (and idem serve's) run at once; on
SQLite one relay per file holds it at a time (see docs/PROJECTION.md).`

type relayCommand struct {
	*Main
}

type relayOptions struct {
	commandLine
	db, publish, events string
}

func (o *relayOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "the database of idem serve: a SQLite file path, a postgres:// URL or a mysql:// URL")
	fs.StringVar(&o.publish, "publish", "", "the broker URL to publish to: nats://host:4222 (JetStream) or amqp://user:pass@host:5672/vhost (RabbitMQ); required")
	fs.StringVar(&o.events, "events", defaultEvents, "the name the events' stream, subject and exchange derive from (as in idem serve -publish)")
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
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	b, err := openBackend(ctx, o.db, backendOptions{lockedHint: "another process holds the file"})
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer closeWithin(b.close, 5*time.Second, log)
	stop, err := startRelay(ctx, b.store, o.publish, eventsNamed(o.events), log)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	<-ctx.Done()
	stop()
	return nil
}

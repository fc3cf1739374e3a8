package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

const completeSynopsis = `complete [-db idem.db | postgres://… | mysql://… | redis://… -ledger idem.db | postgres://… | mysql://…] -provider URL [-lease 30s] [-provider-timeout 2s] [-ttl 24h] [-report-after 15m]

complete makes one pass of the completer, then exits: it finds the payouts
(leased work) whose lease has ended without an answer, because their process
died or their client gave up on a 503, and drives each one on from its last
recovery point, calling the provider at -provider with the same derived key
(see docs/PAYOUTS.md). It prints what it did. Its exit status is 1 when the
store failed. On SQLite it cannot run beside the idem serve of the same file;
idem serve -provider runs the completer itself. With the payouts' records on
Redis, give the -db and -ledger of idem serve.`

type completeCommand struct {
	*Main
}

// completeOptions is idem complete's command line.
type completeOptions struct {
	commandLine
	db, ledger string
	leased     leasedOptions
	ttl        time.Duration

	// Set by validate.
	sqlDB, redisDB string // see ledgerDB
}

func (o *completeOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, a postgres:// URL or a mysql:// URL; or the redis:// URL of idem serve's payouts, with -ledger")
	fs.StringVar(&o.ledger, "ledger", "", "with a redis:// -db: the SQL database of the ledger (idem serve's -ledger); defaults to "+defaultDB)
	o.leased.flags(fs)
	fs.DurationVar(&o.ttl, "ttl", idem.DefaultTTL, "how long a finished payout's answer is kept and replayed")
}

func (o *completeOptions) validate() error {
	if err := o.noArgs("complete"); err != nil {
		return err
	}
	if o.leased.provider == "" {
		return usageError{"complete: -provider is required: the completer calls the provider to finish payouts"}
	}
	if err := o.leased.validate("complete", o.ttl); err != nil {
		return err
	}
	var err error
	o.sqlDB, o.redisDB, err = ledgerDB("complete", o.db, o.ledger)
	return err
}

// Run parses args, validates them and runs idem complete.
func (c *completeCommand) Run(ctx context.Context, args []string) error {
	o := new(completeOptions)
	if err := c.parseOptions("complete", completeSynopsis, flagsFirst, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *completeCommand) run(ctx context.Context, o *completeOptions) error {
	log := slog.New(slog.NewTextHandler(c.Stderr, nil))
	b, err := openBackend(ctx, o.sqlDB, backendOptions{existing: true})
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	defer b.close()
	ls, closeLeased, err := openLeased(ctx, b, o.redisDB)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	defer closeLeased()
	cfg := &transfers.Config{Logger: log}
	if cfg.Guard, err = idem.New(b.store, &idem.Config{TTL: o.ttl}); err != nil {
		return err
	}
	if err := o.leased.configure(cfg, ls, o.ttl); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	// The service registers the payout work with cfg.Leased: the
	// completer runs it.
	if _, err := transfers.New(ctx, b.ledger, cfg); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	comp, err := idem.NewCompleter(cfg.Leased, &idem.CompleterConfig{Logger: log, ReportAfter: o.leased.reportAfter})
	if err != nil {
		return err
	}
	rep, err := comp.RunOnce(ctx)
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	fmt.Fprintf(c.Stdout, "found %d abandoned record(s): %d completed, %d failed (retried later), %d skipped (taken by another process), %d of an unknown kind, %d store failure(s); %d pending past -report-after (need a human)\n",
		rep.Found, rep.Completed, rep.Failed, rep.Skipped, rep.UnknownKind, rep.Unavailable, rep.Stuck)
	if rep.Unavailable > 0 {
		return fmt.Errorf("complete: the store failed on %d record(s)", rep.Unavailable)
	}
	return nil
}

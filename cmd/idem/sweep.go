package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/idemkit/idem"
)

const sweepSynopsis = "sweep [-db idem.db | postgres://… | mysql://…] [-batch 1000]\n\nsweep deletes expired records; it never creates or migrates tables."

type sweepCommand struct {
	*Main
}

// sweepOptions is idem sweep's command line.
type sweepOptions struct {
	commandLine
	db    string
	batch int
}

func (o *sweepOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, a postgres:// URL or a mysql:// URL")
	fs.IntVar(&o.batch, "batch", 1000, "records deleted per statement")
}

func (o *sweepOptions) validate() error {
	if err := o.noArgs("sweep"); err != nil {
		return err
	}
	if o.batch <= 0 {
		return usageError{fmt.Sprintf("sweep: -batch must be positive, got %d", o.batch)}
	}
	return needSQL("sweep", o.db, "sweep deletes the expired records of the SQL database (Redis expires its own)")
}

// Run parses args, validates them and runs idem sweep.
func (c *sweepCommand) Run(ctx context.Context, args []string) error {
	o := new(sweepOptions)
	if err := c.parseOptions("sweep", sweepSynopsis, flagsFirst, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *sweepCommand) run(ctx context.Context, o *sweepOptions) error {
	b, err := openBackend(ctx, o.db, backendOptions{existing: true})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	defer b.close()
	n, err := sweep(ctx, b.store, o.batch)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	fmt.Fprintf(c.Stdout, "deleted %d expired record(s)\n", n)
	return nil
}

// sweep deletes store's expired records in batches of batch.
func sweep(ctx context.Context, store idem.Store, batch int) (int, error) {
	d, ok := store.(idem.ExpiredDeleter)
	if !ok {
		return 0, fmt.Errorf("this store (%T) cannot delete expired records: it does not implement idem.ExpiredDeleter", store)
	}
	sw, err := idem.NewSweeper(d, &idem.SweeperConfig{BatchSize: batch})
	if err != nil {
		return 0, err
	}
	return sw.Sweep(ctx)
}

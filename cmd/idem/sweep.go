package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/idemkit/idem"
)

type sweepCommand struct {
	*Main
}

func (c *sweepCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	db := fs.String("db", defaultDB, "SQLite file path, or a postgres:// URL")
	batch := fs.Int("batch", 1000, "records deleted per statement")
	if err := c.parse(fs, args, "sweep [-db idem.db | postgres://…] [-batch 1000]\n\nsweep deletes expired records; it never creates or migrates tables."); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("sweep: unexpected argument %q (run \"idem sweep -h\")", fs.Arg(0))}
	}
	if *batch <= 0 {
		return usageError{fmt.Sprintf("sweep: -batch must be positive, got %d", *batch)}
	}
	if err := needSQL("sweep", *db, "sweep deletes the expired records of the SQL database (Redis expires its own)"); err != nil {
		return err
	}
	b, err := openBackend(ctx, *db, backendOptions{existing: true})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	defer b.close()
	n, err := sweep(ctx, b.store, *batch)
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

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
	if err := c.parse(fs, args, "sweep [-db idem.db | postgres://…] [-batch 1000]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("sweep: unexpected argument %q (run \"idem sweep -h\")", fs.Arg(0))}
	}
	if *batch <= 0 {
		return usageError{fmt.Sprintf("sweep: -batch must be positive, got %d", *batch)}
	}
	b, err := openBackend(ctx, *db, backendOptions{mustExist: true})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	defer b.close()
	sw, err := idem.NewSweeper(b.store.(idem.ExpiredDeleter), &idem.SweeperConfig{BatchSize: *batch})
	if err != nil {
		return err
	}
	n, err := sw.Sweep(ctx)
	fmt.Fprintf(c.Stdout, "deleted %d expired record(s)\n", n)
	return err
}

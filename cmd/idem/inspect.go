package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
)

type inspectCommand struct {
	*Main
}

func (c *inspectCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	db := fs.String("db", defaultDB, "SQLite file path, or a postgres:// URL")
	if err := c.parse(fs, args, "inspect [-db idem.db | postgres://…] <scope> <key>"); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError{`inspect: want two arguments, <scope> and <key> (the transfers service's scopes are "anonymous" and "bearer:<token>")`}
	}
	scope, key := fs.Arg(0), fs.Arg(1)
	b, err := openBackend(ctx, *db, backendOptions{mustExist: true})
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	defer b.close()
	in, ok := b.store.(idem.Inspector)
	if !ok {
		return errors.New("inspect: this store cannot look records up")
	}
	rec, err := in.Lookup(ctx, &idem.LookupParams{Scope: scope, Key: key})
	if errors.Is(err, idem.ErrNotFound) {
		return fmt.Errorf("inspect: no record for scope %q and key %q", scope, key)
	}
	if err != nil {
		return err
	}
	state := string(rec.State)
	if rec.Expired(time.Now()) {
		state += " (expired: behaves as new)"
	}
	w := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "scope\t%s\n", rec.Scope)
	fmt.Fprintf(w, "key\t%s\n", rec.Key)
	fmt.Fprintf(w, "state\t%s\n", state)
	fmt.Fprintf(w, "fingerprint\t%s\n", rec.Fingerprint)
	fmt.Fprintf(w, "created\t%s\n", rec.CreatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "expires\t%s\n", rec.ExpiresAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "status\t%d\n", rec.Result.Status)
	fmt.Fprintf(w, "headers\t%d\n", len(rec.Result.Header))
	fmt.Fprintf(w, "body\t%d bytes\n", len(rec.Result.Body))
	return w.Flush()
}

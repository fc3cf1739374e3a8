package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

const forgetSynopsis = `forget [-db idem.db | postgres://… | mysql://… | redis://…] <scope> <key> [--force] --reason TEXT [--actor NAME] [--wait 5s]

forget deletes a completed or expired record, so that the next request
with the key runs again. It refuses a pending (leased) record, whose work
may have had effects, unless --force; it never deletes a record whose
lease is live, even with --force. The record as it was, who (--actor, or
the OS user), when and why are written to the audit log in the same
transaction (idem keys --audit lists it). <scope> and <key> are given as
for idem inspect. A running idem serve may still replay a completed record
from memory for up to 5 seconds after its last read of it (its console
forgets at once): forget waits that long (--wait) before it returns.`

type forgetCommand struct {
	*Main
}

// forgetOptions is idem forget's command line.
type forgetOptions struct {
	commandLine
	db, reason, actor string
	force             bool
	wait              time.Duration

	// Set by validate.
	scope, key string
}

func (o *forgetOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, postgres:// URL, mysql:// URL, or redis:// server")
	fs.StringVar(&o.reason, "reason", "", "why (required; written to the audit log)")
	fs.StringVar(&o.actor, "actor", "", "who, for the audit log (default: the OS user)")
	fs.BoolVar(&o.force, "force", false, "delete a pending record whose lease has ended too (never one whose lease is live)")
	fs.DurationVar(&o.wait, "wait", idem.DefaultReplayCacheAge, "after deleting a live completed record, wait this long for running servers to stop replaying it from memory (their idem.Config.ReplayCacheAge)")
}

func (o *forgetOptions) validate() error {
	if len(o.args) != 2 {
		return usageError{"forget: want two arguments, <scope> and <key>"}
	}
	o.scope = o.args[0]
	var err error
	if o.key, err = parseKeyArg(o.args[1]); err != nil {
		return usageError{fmt.Sprintf("forget: %v", err)}
	}
	if strings.TrimSpace(o.reason) == "" {
		return usageError{"forget: --reason is required: say why, for the audit log"}
	}
	if o.wait < 0 {
		return usageError{fmt.Sprintf("forget: --wait must not be negative, got %s", o.wait)}
	}
	return nil
}

// Run parses args, validates them and runs idem forget.
func (c *forgetCommand) Run(ctx context.Context, args []string) error {
	o := new(forgetOptions)
	if err := c.parseOptions("forget", forgetSynopsis, flagsAnywhere, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *forgetCommand) run(ctx context.Context, o *forgetOptions) error {
	s, err := openAdmin(ctx, "forget", o.db, false)
	if err != nil {
		return err
	}
	defer s.close()
	rec, err := forget(ctx, s, change{scope: o.scope, key: o.key, actor: actorName(o.actor), reason: o.reason, force: o.force}, time.Now())
	if err != nil {
		return fmt.Errorf("forget: %w", refusalHint(err))
	}
	if rec.State == idem.StateCompleted && time.Now().Before(rec.ExpiresAt) && o.wait > 0 {
		// Running servers may hold it in their replay caches.
		fmt.Fprintf(c.Stderr, "idem forget: deleted; waiting %s for running servers to stop replaying it from memory\n", o.wait)
		select {
		case <-time.After(o.wait):
		case <-ctx.Done():
			return fmt.Errorf("forget: deleted, but interrupted before running servers' replay caches dropped it (%s after now, the next request runs again)", o.wait)
		}
	}
	fmt.Fprintf(c.Stdout, "forgot %s %s (it was %s, status %d, %d attempt(s)); the next request with the key runs again\n",
		rec.Scope, rec.Key, recordState(rec, time.Now()), rec.Result.Status, rec.Attempts)
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
)

const pendingSynopsis = `pending [-db idem.db | postgres://… | mysql://… | redis://…] [--stuck] [--report-after 15m] [--json]

pending lists the pending (leased) records: the work in flight, and the
work that needs a human: its lease ended (the holder crashed or released
it), or it has been pending longer than the report bound (--report-after,
as idem serve's). Each comes with its steps (recovery points), attempts
and last error. --stuck lists only the latter. pending never changes the
database.`

type pendingCommand struct {
	*Main
}

// pendingOptions is idem pending's command line.
type pendingOptions struct {
	commandLine
	db          string
	stuck       bool
	asJSON      bool
	reportAfter time.Duration
}

func (o *pendingOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, postgres:// URL, mysql:// URL, or redis:// server")
	fs.BoolVar(&o.stuck, "stuck", false, "only the records whose lease ended or that are older than --report-after")
	fs.DurationVar(&o.reportAfter, "report-after", 15*time.Minute, "the report bound: a record pending longer needs a human")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object a line")
}

func (o *pendingOptions) validate() error {
	if err := o.noArgs("pending"); err != nil {
		return err
	}
	if o.reportAfter <= 0 {
		return usageError{fmt.Sprintf("pending: --report-after must be positive, got %s", o.reportAfter)}
	}
	return nil
}

// Run parses args, validates them and runs idem pending.
func (c *pendingCommand) Run(ctx context.Context, args []string) error {
	o := new(pendingOptions)
	if err := c.parseOptions("pending", pendingSynopsis, flagsAnywhere, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

// isStuck reports whether a pending record needs a human at now: its
// lease has ended, or it is older than reportAfter.
func isStuck(r *idem.Record, now time.Time, reportAfter time.Duration) bool {
	return !r.LeaseUntil.After(now) || now.Sub(r.CreatedAt) >= reportAfter
}

// pendingRecord is one pending record with its steps.
type pendingRecord struct {
	rec   *idem.Record
	steps []idem.Step
	stuck bool
}

// eachPending calls fn with every pending record (stuck ones only if
// stuckOnly) and its steps, a page at a time.
func eachPending(ctx context.Context, a idem.Admin, now time.Time, reportAfter time.Duration, stuckOnly bool, fn func(pendingRecord) error) error {
	p := &idem.ListParams{State: idem.ListPending, Now: now, Limit: adminPage}
	for {
		page, err := a.List(ctx, p)
		if err != nil {
			return err
		}
		for _, r := range page.Records {
			pr := pendingRecord{rec: r, stuck: isStuck(r, now, reportAfter)}
			if stuckOnly && !pr.stuck {
				continue
			}
			if pr.steps, err = a.Steps(ctx, &idem.LookupParams{Scope: r.Scope, Key: r.Key}); err != nil {
				return err
			}
			if err := fn(pr); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		p.Cursor = page.Next
	}
}

func (c *pendingCommand) run(ctx context.Context, o *pendingOptions) error {
	s, err := openAdmin(ctx, "pending", o.db, true)
	if err != nil {
		return err
	}
	defer s.close()
	now := time.Now()
	enc := json.NewEncoder(c.Stdout)
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	if !o.asJSON {
		fmt.Fprintln(tw, "SCOPE\tKEY\tKIND\tCREATED\tLEASE\tATTEMPTS\tSTEPS\tLAST ERROR")
	}
	n := 0
	err = eachPending(ctx, s.admin, now, o.reportAfter, o.stuck, func(pr pendingRecord) error {
		n++
		if o.asJSON {
			j := toJSON(pr.rec, now)
			j.Stuck = &pr.stuck
			j.Steps = []stepJSON{}
			for _, st := range pr.steps {
				j.Steps = append(j.Steps, stepJSON{Name: st.Name, Output: string(st.Output)})
			}
			return enc.Encode(j)
		}
		lease := "live until " + pr.rec.LeaseUntil.UTC().Format(time.RFC3339)
		if !pr.rec.LeaseUntil.After(now) {
			lease = "ended " + pr.rec.LeaseUntil.UTC().Format(time.RFC3339)
		}
		if pr.stuck {
			lease += " (stuck)"
		}
		steps := "-"
		if len(pr.steps) > 0 {
			steps = ""
			for i, st := range pr.steps {
				if i > 0 {
					steps += ", "
				}
				steps += st.Name
			}
		}
		lastErr := pr.rec.LastError
		if lastErr == "" {
			lastErr = "-"
		}
		_, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", pr.rec.Scope, pr.rec.Key, pr.rec.Kind,
			pr.rec.CreatedAt.UTC().Format(time.RFC3339), lease, pr.rec.Attempts, steps, lastErr)
		return err
	})
	if err != nil {
		return fmt.Errorf("pending: %w", err)
	}
	if !o.asJSON {
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.Stderr, "%d pending record(s)\n", n)
	}
	return nil
}

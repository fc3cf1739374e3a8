package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem"
)

const keysSynopsis = `keys [-db idem.db | postgres://… | mysql://… | redis://…] [--scope S] [--prefix P] [--state completed|pending|expired] [--older-than D] [--limit N] [--json]
       keys --audit [-db …] [--limit N] [--json]

keys lists the idempotency records, ordered by scope and key, a page at a
time (it never holds more than a page, however many records there are):
state, times, status, kind and attempts. --json prints one JSON object a
line. --audit lists instead what operators changed (idem forget, idem
resolve, the console), newest first. keys never changes the database.`

type keysCommand struct {
	*Main
}

// keysOptions is idem keys' command line.
type keysOptions struct {
	commandLine
	db, scope, prefix, state string
	olderThan                time.Duration
	limit                    int
	asJSON, audit            bool

	// Set by validate.
	listState idem.ListState
}

func (o *keysOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, postgres:// URL, mysql:// URL, or redis:// server")
	fs.StringVar(&o.scope, "scope", "", "only the records of this scope (as the Guard got it, or as a listing shows it)")
	fs.StringVar(&o.prefix, "prefix", "", "only the keys that begin with this")
	fs.StringVar(&o.state, "state", "", "only the records in this state: completed, pending or expired")
	fs.DurationVar(&o.olderThan, "older-than", 0, "only the records created longer ago than this")
	fs.IntVar(&o.limit, "limit", 0, "print at most this many (0: all)")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object a line")
	fs.BoolVar(&o.audit, "audit", false, "list the audit log (who forgot or resolved what, when and why) instead")
}

func (o *keysOptions) validate() error {
	if err := o.noArgs("keys"); err != nil {
		return err
	}
	var err error
	if o.listState, err = idem.ParseListState(o.state); err != nil {
		return usageError{fmt.Sprintf("keys: --state must be completed, pending or expired, got %q", o.state)}
	}
	switch {
	case o.olderThan < 0:
		return usageError{fmt.Sprintf("keys: --older-than must not be negative, got %s", o.olderThan)}
	case o.limit < 0:
		return usageError{fmt.Sprintf("keys: --limit must not be negative, got %d", o.limit)}
	case o.audit:
		for _, f := range []string{"scope", "prefix", "state", "older-than"} {
			if o.given[f] {
				return usageError{fmt.Sprintf("keys: --%s does not apply to --audit (which takes --limit and --json)", f)}
			}
		}
	}
	return nil
}

// Run parses args, validates them and runs idem keys.
func (c *keysCommand) Run(ctx context.Context, args []string) error {
	o := new(keysOptions)
	if err := c.parseOptions("keys", keysSynopsis, flagsAnywhere, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *keysCommand) run(ctx context.Context, o *keysOptions) error {
	s, err := openAdmin(ctx, "keys", o.db, true)
	if err != nil {
		return err
	}
	defer s.close()
	if o.audit {
		return c.listAudit(ctx, s.admin, o)
	}
	now := time.Now()
	p := &idem.ListParams{Prefix: o.prefix, State: o.listState, Now: now, Limit: adminPage}
	if o.scope != "" {
		p.Scope = idem.StoredScope(o.scope)
	}
	if o.olderThan > 0 {
		p.CreatedBefore = now.Add(-o.olderThan)
	}
	out := newRecordPrinter(c.Stdout, o.asJSON)
	n := 0
	for {
		if o.limit > 0 {
			p.Limit = min(adminPage, o.limit-n)
		}
		page, err := s.admin.List(ctx, p)
		if err != nil {
			return fmt.Errorf("keys: %w", err)
		}
		for _, r := range page.Records {
			if err := out.record(r, now); err != nil {
				return err
			}
		}
		n += len(page.Records)
		if err := out.flush(); err != nil {
			return err
		}
		if page.Next == "" || (o.limit > 0 && n >= o.limit) {
			break
		}
		p.Cursor = page.Next
	}
	if !o.asJSON {
		fmt.Fprintf(c.Stderr, "%d record(s)\n", n)
	}
	return nil
}

func (c *keysCommand) listAudit(ctx context.Context, a idem.Admin, o *keysOptions) error {
	p := &idem.AuditParams{Limit: adminPage}
	var tw *tabwriter.Writer
	if !o.asJSON {
		tw = tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tAT\tACTOR\tACTION\tSCOPE\tKEY\tSTATUS\tBEFORE\tREASON")
	}
	enc := json.NewEncoder(c.Stdout)
	n := 0
	for {
		if o.limit > 0 {
			p.Limit = min(adminPage, o.limit-n)
		}
		page, err := a.Audit(ctx, p)
		if err != nil {
			return fmt.Errorf("keys --audit: %w", err)
		}
		for _, e := range page.Entries {
			if o.asJSON {
				if err := enc.Encode(auditToJSON(e)); err != nil {
					return err
				}
				continue
			}
			before := "-"
			if e.Before != nil {
				before = fmt.Sprintf("%s (status %d, attempts %d)", recordState(e.Before, e.At), e.Before.Result.Status, e.Before.Attempts)
			}
			status := "-"
			if e.Status != 0 {
				status = fmt.Sprint(e.Status)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.At.UTC().Format(time.RFC3339), e.Actor, e.Action,
				e.Scope, e.Key, status, before, e.Reason)
		}
		n += len(page.Entries)
		if tw != nil {
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if page.Next == 0 || (o.limit > 0 && n >= o.limit) {
			return nil
		}
		p.Cursor = page.Next
	}
}

// recordPrinter prints records a page at a time: a table, flushed after
// each page, or one JSON object a line.
type recordPrinter struct {
	tw     *tabwriter.Writer
	enc    *json.Encoder
	header bool
}

func newRecordPrinter(w io.Writer, asJSON bool) *recordPrinter {
	if asJSON {
		return &recordPrinter{enc: json.NewEncoder(w)}
	}
	return &recordPrinter{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

func (p *recordPrinter) record(r *idem.Record, now time.Time) error {
	if p.enc != nil {
		return p.enc.Encode(toJSON(r, now))
	}
	if !p.header {
		fmt.Fprintln(p.tw, "SCOPE\tKEY\tSTATE\tCREATED\tEXPIRES/LEASE\tSTATUS\tKIND\tATTEMPTS")
		p.header = true
	}
	until := r.ExpiresAt
	if r.State == idem.StatePending {
		until = r.LeaseUntil
	}
	status := "-"
	if r.State == idem.StateCompleted {
		status = fmt.Sprint(r.Result.Status)
	}
	kind := r.Kind
	if kind == "" {
		kind = "-"
	}
	_, err := fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Scope, r.Key, recordState(r, now),
		r.CreatedAt.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339), status, kind, r.Attempts)
	return err
}

func (p *recordPrinter) flush() error {
	if p.tw != nil {
		return p.tw.Flush()
	}
	return nil
}

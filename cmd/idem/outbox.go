package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idem/outbox"
)

const outboxSynopsis = `outbox [-db idem.db | postgres://… | mysql://…] [-json] [-limit 100] [-unpark ID,ID… | -unpark all]

outbox shows what the outbox of -db (the database of idem serve -publish)
holds that is not sent: how many messages are pending, when the oldest was
staged, and the parked messages, which the relay stopped publishing after
repeated refusals (a RabbitMQ exchange with no queue bound, a stream that
does not capture the subject), each with its last error. Bodies are not
printed.

-unpark makes parked messages pending again, their failures forgotten, for
the relay to publish: a comma-separated list of ids, or all. Fix what made
the broker refuse them first, or they are parked again.`

type outboxCommand struct {
	*Main
}

type outboxOptions struct {
	commandLine
	db, unpark string
	limit      int
	asJSON     bool
}

func (o *outboxOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "the database of idem serve: a SQLite file path, a postgres:// URL or a mysql:// URL")
	fs.StringVar(&o.unpark, "unpark", "", "make these parked messages pending again: comma-separated ids, or all")
	fs.IntVar(&o.limit, "limit", 100, "the most parked messages listed")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
}

func (o *outboxOptions) validate() error {
	if err := o.noArgs("outbox"); err != nil {
		return err
	}
	if isRedis(o.db) {
		return usageError{"outbox: -db must be the SQL database of idem serve (a SQLite file path, a postgres:// URL or a mysql:// URL): the outbox lives beside the ledger"}
	}
	if o.limit < 1 || o.limit > 10000 {
		return usageError{fmt.Sprintf("outbox: -limit must be 1 to 10000, got %d", o.limit)}
	}
	if o.given["unpark"] {
		for _, id := range strings.Split(o.unpark, ",") {
			if id == "" {
				return usageError{fmt.Sprintf("outbox: -unpark needs message ids separated by commas, or all; got %q", o.unpark)}
			}
		}
	}
	return nil
}

// Run parses args, validates them and runs idem outbox.
func (c *outboxCommand) Run(ctx context.Context, args []string) error {
	o := new(outboxOptions)
	if err := c.parseOptions("outbox", outboxSynopsis, flagsAnywhere, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *outboxCommand) run(ctx context.Context, o *outboxOptions) error {
	if err := sqliteExists("outbox", o.db); err != nil {
		return err
	}
	b, err := openBackend(ctx, o.db, backendOptions{lockedHint: "another process holds the file (idem serve on SQLite): stop it, or read the outbox of PostgreSQL or MySQL, where both run at once"})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer b.close()
	src, _, err := outboxSource(b.store)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if cl, ok := src.(interface{ Close() error }); ok {
		defer cl.Close()
	}
	if o.given["unpark"] {
		return c.unpark(ctx, src, o)
	}
	return c.show(ctx, src, o)
}

// outboxJSON is idem outbox -json's output.
type outboxJSON struct {
	Pending       int64        `json:"pending"`
	OldestPending *time.Time   `json:"oldest_pending"`
	Parked        int64        `json:"parked"`
	Messages      []parkedJSON `json:"parked_messages"`
}

type parkedJSON struct {
	ID        string    `json:"id"`
	Subject   string    `json:"subject"`
	StagedAt  time.Time `json:"staged_at"`
	ParkedAt  time.Time `json:"parked_at"`
	Attempts  int       `json:"attempts"`
	BodyBytes int       `json:"body_bytes"`
	LastError string    `json:"last_error"`
}

func (c *outboxCommand) show(ctx context.Context, src outbox.Source, o *outboxOptions) error {
	bl, err := src.Backlog(ctx)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	parked, err := src.Parked(ctx, o.limit)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	out := outboxJSON{Pending: bl.Pending, Parked: bl.Parked, Messages: []parkedJSON{}}
	if !bl.OldestPending.IsZero() {
		t := bl.OldestPending.UTC()
		out.OldestPending = &t
	}
	for _, p := range parked {
		out.Messages = append(out.Messages, parkedJSON{ID: p.ID, Subject: p.Subject, StagedAt: p.StagedAt.UTC(), ParkedAt: p.ParkedAt.UTC(),
			Attempts: p.Attempt, BodyBytes: len(p.Body), LastError: p.LastError})
	}
	if o.asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	oldest := "-"
	if out.OldestPending != nil {
		oldest = out.OldestPending.Format(time.RFC3339Nano) + " (" + time.Since(*out.OldestPending).Round(time.Millisecond).String() + " ago)"
	}
	fmt.Fprintf(c.Stdout, "pending: %d, oldest staged: %s\nparked: %d\n", out.Pending, oldest, out.Parked)
	if len(out.Messages) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUBJECT\tSTAGED\tPARKED\tATTEMPTS\tLAST ERROR")
	for _, m := range out.Messages {
		subj := m.Subject
		if subj == "" {
			subj = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", m.ID, subj, m.StagedAt.Format(time.RFC3339), m.ParkedAt.Format(time.RFC3339), m.Attempts, oneLine(m.LastError))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if int64(len(out.Messages)) < out.Parked {
		fmt.Fprintf(c.Stderr, "%d of %d parked message(s) listed; -limit lists more\n", len(out.Messages), out.Parked)
	}
	return nil
}

// unpark makes the parked messages of -unpark pending again. It fails if
// one of the ids named is not a parked message (the others are unparked).
func (c *outboxCommand) unpark(ctx context.Context, src outbox.Source, o *outboxOptions) error {
	if o.unpark == "all" {
		// Page through the parked messages until none is left, at most
		// one pass over what was parked when it started.
		bl, err := src.Backlog(ctx)
		if err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		done := 0
		for int64(done) < bl.Parked {
			page, err := src.Parked(ctx, 1000)
			if err != nil {
				return fmt.Errorf("outbox: %d unparked, then: %w", done, err)
			}
			if len(page) == 0 {
				break
			}
			for _, p := range page {
				if _, err := src.Unpark(ctx, p.ID); err != nil {
					return fmt.Errorf("outbox: %d unparked, then %s: %w", done, p.ID, err)
				}
				done++
			}
		}
		fmt.Fprintf(c.Stdout, "unparked %d message(s)\n", done)
		return nil
	}
	done, missing := 0, []string{}
	for _, id := range strings.Split(o.unpark, ",") {
		ok, err := src.Unpark(ctx, id)
		if err != nil {
			return fmt.Errorf("outbox: %d unparked, then %s: %w", done, id, err)
		}
		if !ok {
			missing = append(missing, id)
			continue
		}
		done++
	}
	fmt.Fprintf(c.Stdout, "unparked %d message(s)\n", done)
	if len(missing) > 0 {
		return fmt.Errorf("outbox: no parked message with id %s", strings.Join(missing, ", "))
	}
	return nil
}

// oneLine keeps an error message on one line of a table.
func oneLine(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Join(strings.Fields(s), " ")
}

// sqliteExists fails unless db, when it is a SQLite file path, names an
// existing file: a command that reads idem serve's database must not
// create an empty one where a path was mistyped.
func sqliteExists(cmd, db string) error {
	if isSQLServer(db) {
		return nil
	}
	if _, err := os.Stat(db); err != nil {
		return fmt.Errorf("%s: no database there (%w); give the -db that idem serve uses", cmd, err)
	}
	return nil
}

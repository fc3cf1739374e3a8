package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

const importSynopsis = `import [-db idem.db | postgres://… | mysql://…] [-batch ID] [-concurrency N] [-ttl 720h] [--json] FILE.csv

import applies a CSV of transfers to the ledger of idem serve (the same -db):
header id,from,to,amount, then one transfer per line (amount in cents; id is
the row's own id, unique in the file). Each row is one transfer, in its own
transaction, keyed by (batch id, row id) in the scope "import": running the
same import again, after a crash or a kill at any point, applies nothing
twice and applies what was missing.

The batch id defaults to "sha256:" and the hex SHA-256 of the file's bytes,
so a changed file is a new batch; give -batch to re-run a corrected file as
the same batch. A file with any malformed line is applied nowhere: every
such line is reported, and the exit status is 1. Rows refused by the ledger
(unknown account, insufficient funds) are recorded, so a re-run reports the
same refusal. Exit status 0 when every row was applied or replayed, 1 when a
row was refused or failed (run it again: failed rows are retried), 2 on a
usage error. On SQLite, import cannot run while idem serve holds the file.
See docs/BATCHES.md.`

// importRecordTTL is how long import rows' records are kept by default: a
// re-run within it replays every row.
const importRecordTTL = 30 * 24 * time.Hour

type importCommand struct {
	*Main
}

// importOptions is idem import's command line.
type importOptions struct {
	commandLine
	db, batchID string
	concurrency int
	ttl         time.Duration
	asJSON      bool

	// Set by validate.
	file string // the CSV file
}

func (o *importOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.db, "db", defaultDB, "SQLite file path, a postgres:// URL or a mysql:// URL: the database of idem serve")
	fs.StringVar(&o.batchID, "batch", "", `the batch id (default "sha256:" and the hex SHA-256 of the file); 1 to 255 bytes of UTF-8`)
	fs.IntVar(&o.concurrency, "concurrency", 0, "rows applied at once (default 1 on SQLite, which writes one transaction at a time, and 4 on PostgreSQL)")
	fs.DurationVar(&o.ttl, "ttl", importRecordTTL, "how long each row's record is kept; a re-run after that finds applied rows in the ledger (refused as already-applied) and runs refused ones again")
	fs.BoolVar(&o.asJSON, "json", false, "print the summary as JSON")
}

func (o *importOptions) validate() error {
	if len(o.args) != 1 {
		return usageError{"import: want one argument, the CSV file (run \"idem import -h\")"}
	}
	o.file = o.args[0]
	switch {
	case o.concurrency < 0:
		return usageError{fmt.Sprintf("import: -concurrency must not be negative, got %d", o.concurrency)}
	case o.ttl <= 0:
		return usageError{fmt.Sprintf("import: -ttl must be positive, got %s", o.ttl)}
	}
	if o.batchID != "" {
		if msg := transfers.CheckImportID(o.batchID); msg != "" {
			return usageError{"import: -batch: " + msg}
		}
	}
	return needSQL("import", o.db, "import applies transfers to the ledger")
}

// Run parses args, validates them and runs idem import. Flags may also
// follow the file ("idem import FILE.csv --json").
func (c *importCommand) Run(ctx context.Context, args []string) error {
	o := new(importOptions)
	if err := c.parseOptions("import", importSynopsis, flagsAnywhere, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *importCommand) run(ctx context.Context, o *importOptions) error {
	file := o.file
	concurrency := o.concurrency
	if concurrency == 0 {
		concurrency = 1
		if isSQLServer(o.db) {
			concurrency = 4
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	sum := &importSummary{BatchID: o.batchID, File: file, Refusals: []importLine{}, Failures: []importLine{}, Malformed: []importLine{}}
	if sum.BatchID == "" {
		h := sha256.Sum256(data)
		sum.BatchID = "sha256:" + hex.EncodeToString(h[:])
	}
	rows, bad, err := transfers.ParseImport(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("import: %s: %w", file, err)
	}
	sum.Rows = len(rows)
	if len(bad) > 0 {
		for _, e := range bad {
			sum.Malformed = append(sum.Malformed, importLine{Line: e.Line, Reason: e.Msg})
		}
		c.print(sum, o.asJSON)
		return fmt.Errorf("import: %s: %d malformed line(s); nothing was applied (a file is applied whole or not at all: see docs/BATCHES.md)", file, len(bad))
	}

	if err := sqliteExists("import", o.db); err != nil {
		return err
	}
	opts := backendOptions{lockedHint: "SQLite is one process per file: stop idem serve, or import into PostgreSQL where both run at once; nothing was applied"}
	if isSQLServer(o.db) {
		opts.pool = concurrency + 1
	}
	b, err := openBackend(ctx, o.db, opts)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer b.close()
	guard, err := idem.New(b.store, nil)
	if err != nil {
		return err
	}
	// A ledger whose transfers idem serve -publish announces gets the
	// events of the rows too, staged in each row's transaction, for its
	// relay (or idem relay) to publish.
	if err := b.ledger.Migrate(ctx); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	announced, err := b.ledger.Announced(ctx)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	svc, err := transfers.New(ctx, b.ledger, &transfers.Config{Guard: guard, Events: announced, Logger: slog.New(slog.NewTextHandler(c.Stderr, nil))})
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if announced {
		fmt.Fprintln(c.Stderr, "idem import: the ledger's transfers are announced (idem serve -publish): each applied row stages its event, which the relay of idem serve -publish or idem relay publishes")
	}

	items := make([]batch.Item[transfers.ImportRow], len(rows))
	for i, r := range rows {
		// What a re-run must find the same under the row's id (account
		// ids hold no comma).
		body := r.From + "," + r.To + "," + strconv.FormatInt(r.Amount, 10)
		items[i] = batch.Item[transfers.ImportRow]{ID: r.ID, Body: []byte(body), Value: r}
	}
	bar := newProgressBar(c.Stderr, isTerminal(c.Stderr), time.Now)
	start := time.Now()
	rep, runErr := batch.Run(ctx, guard, &batch.Config{
		BatchID:     sum.BatchID,
		Scope:       transfers.ImportScope,
		Concurrency: concurrency,
		TTL:         o.ttl,
		Progress:    bar.update,
	}, items, func(ctx context.Context, it batch.Item[transfers.ImportRow]) (idem.Result, error) {
		t, err := svc.ImportTransfer(ctx, sum.BatchID, it.Value)
		if err != nil {
			return idem.Result{}, err
		}
		body, err := json.Marshal(t)
		return idem.Result{Status: 201, Body: body}, err
	})
	if rep == nil {
		return fmt.Errorf("import: %w", runErr)
	}
	bar.finish()
	sum.Seconds = time.Since(start).Seconds()
	sum.Applied, sum.Replayed, sum.Refused, sum.Failed = rep.Applied, rep.Replayed, rep.Refused, rep.Failed
	for i, ir := range rep.Items {
		l := importLine{Line: rows[i].Line, ID: ir.ID, Reason: ir.Reason, Replayed: ir.Replayed}
		switch ir.Outcome {
		case batch.Refused:
			sum.Refusals = append(sum.Refusals, l)
		case batch.Failed:
			sum.Failures = append(sum.Failures, l)
		}
	}
	c.print(sum, o.asJSON)
	switch {
	case runErr != nil:
		return fmt.Errorf("import: stopped: %w; %d row(s) not applied: run the same import again", runErr, rep.Failed)
	case rep.Failed > 0:
		return fmt.Errorf("import: %d row(s) failed and were not applied: run the same import again", rep.Failed)
	case rep.Refused > 0:
		return fmt.Errorf("import: %d row(s) refused", rep.Refused)
	}
	return nil
}

// importSummary is what idem import prints, and its --json form.
type importSummary struct {
	BatchID  string `json:"batch_id"`
	File     string `json:"file"`
	Rows     int    `json:"rows"`
	Applied  int    `json:"applied"`
	Replayed int    `json:"replayed"`
	Refused  int    `json:"refused"`
	Failed   int    `json:"failed"`
	// Malformed lists the malformed lines; when it is not empty, nothing
	// was applied and the counts are zero.
	Malformed []importLine `json:"malformed"`
	Refusals  []importLine `json:"refusals"`
	Failures  []importLine `json:"failures"`
	Seconds   float64      `json:"seconds"`
}

// importLine is one line of the file the summary speaks of.
type importLine struct {
	Line     int    `json:"line"`
	ID       string `json:"id,omitempty"`
	Reason   string `json:"reason"`
	Replayed bool   `json:"replayed,omitempty"`
}

// maxListed bounds the lines the text summary lists of each kind; --json
// lists them all.
const maxListed = 50

func (c *importCommand) print(sum *importSummary, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(sum)
		return
	}
	w := c.Stdout
	list := func(title string, lines []importLine) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "%s:\n", title)
		for i, l := range lines {
			if i == maxListed {
				fmt.Fprintf(w, "  … and %d more (--json lists them all)\n", len(lines)-maxListed)
				break
			}
			switch {
			case l.ID == "":
				fmt.Fprintf(w, "  line %d: %s\n", l.Line, l.Reason)
			case l.Replayed:
				fmt.Fprintf(w, "  line %d, row %q: %s (recorded by an earlier run)\n", l.Line, l.ID, l.Reason)
			default:
				fmt.Fprintf(w, "  line %d, row %q: %s\n", l.Line, l.ID, l.Reason)
			}
		}
	}
	if len(sum.Malformed) > 0 {
		fmt.Fprintf(w, "%s: %d malformed line(s); nothing applied\n", sum.File, len(sum.Malformed))
		list("malformed", sum.Malformed)
		fmt.Fprintf(w, "fix the file and import it again (a fixed file is a new batch unless you give -batch)\n")
		return
	}
	fmt.Fprintf(w, "batch %s: %d row(s) in %s\n", sum.BatchID, sum.Rows, sum.File)
	fmt.Fprintf(w, "applied %d, replayed %d, refused %d, failed %d (%.1f s)\n", sum.Applied, sum.Replayed, sum.Refused, sum.Failed, sum.Seconds)
	list("refused", sum.Refusals)
	list("failed (not applied; run the import again)", sum.Failures)
}

// isTerminal reports whether w is a terminal, where a progress bar can be
// redrawn in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

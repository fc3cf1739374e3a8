package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/demo"
)

const demoSynopsis = "demo [--seed N] [--intents N] [--json] [--html report.html]"

type demoCommand struct {
	*Main
}

// demoOptions is idem demo's command line.
type demoOptions struct {
	commandLine
	seed                    uint64
	intents, clients, kills int
	db                      string
	asJSON, verbose         bool
	htmlOut                 string
}

func (o *demoOptions) flags(fs *flag.FlagSet) {
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the faults and the transfers")
	fs.IntVar(&o.intents, "intents", 300, "transfers decided per mode")
	fs.IntVar(&o.clients, "clients", 8, "concurrent clients")
	fs.IntVar(&o.kills, "kills", 3, "times the server is killed with SIGKILL per mode (0: never)")
	fs.StringVar(&o.db, "db", "", "postgres:// URL to run on PostgreSQL (a fresh schema per mode); empty for SQLite")
	fs.BoolVar(&o.asJSON, "json", false, "print the reports as JSON")
	fs.BoolVar(&o.verbose, "v", false, "show the servers' logs")
	fs.StringVar(&o.htmlOut, "html", "", "also write the run as one self-contained HTML page to this file: the modes side by side, a timeline of every intent's attempts, faults, kills and replays, and the table")
}

func (o *demoOptions) validate() error {
	if err := o.noArgs("demo"); err != nil {
		return err
	}
	if o.intents <= 0 || o.clients <= 0 || o.kills < 0 {
		return usageError{"demo: -intents and -clients must be positive and -kills not negative"}
	}
	if o.db != "" && !isPostgres(o.db) {
		return usageError{fmt.Sprintf("demo: -db must be a postgres:// URL, got %q", o.db)}
	}
	if o.htmlOut != "" {
		// Fail before a run of a minute, not after it: the page's
		// directory must take a file.
		if err := checkWritableDir(o.htmlOut); err != nil {
			return usageError{fmt.Sprintf("demo: --html %s: %v", o.htmlOut, err)}
		}
	}
	return nil
}

// Run parses args, validates them and runs idem demo.
func (c *demoCommand) Run(ctx context.Context, args []string) error {
	o := new(demoOptions)
	if err := c.parseOptions("demo", demoSynopsis, flagsFirst, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *demoCommand) run(ctx context.Context, o *demoOptions) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	k := o.kills
	if k == 0 {
		k = -1
	}
	cfg := &demo.Config{
		Binary: self, DB: o.db, Seed: o.seed, Intents: o.intents, Clients: o.clients, Kills: k,
		Progress: c.Stderr,
	}
	if o.verbose {
		cfg.ServerLog = c.Stderr
	}
	fmt.Fprintf(c.Stderr, "idem demo: %d transfers per mode from %d impatient clients (timeout %s), over a network that drops, delays and resets; the server is killed with SIGKILL %d times per mode\n",
		o.intents, o.clients, 300*time.Millisecond, o.kills)
	reports, err := demo.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if o.htmlOut != "" {
		if err := writeDemoHTML(o.htmlOut, reports, demo.HTMLInfo{Seed: o.seed, Intents: o.intents, Clients: o.clients, Kills: o.kills}); err != nil {
			return err
		}
		fmt.Fprintf(c.Stderr, "idem demo: wrote %s\n", o.htmlOut)
	}
	if o.asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reports); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.Stdout)
		if err := demo.WriteTable(c.Stdout, reports); err != nil {
			return err
		}
		fmt.Fprintln(c.Stdout, "\nno-key: retries without a key run again. key-per-attempt: the incident's bug, a new key per retry.\nidem: one key per intent; every retry is recognised and answered with the recorded result.")
	}
	for _, r := range reports {
		if r.Mode == demo.ModeIdem && (r.Duplicated != 0 || r.Lost != 0 || !r.Conserved || !r.Correct) {
			return fmt.Errorf("demo: idem mode failed its audit: %+v", r)
		}
	}
	return nil
}

// writeDemoHTML writes the HTML report to path, whole or not at all.
func writeDemoHTML(path string, reports []demo.Report, info demo.HTMLInfo) error {
	var b bytes.Buffer
	if err := demo.WriteHTML(&b, reports, info); err != nil {
		return fmt.Errorf("demo: -html: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("demo: -html: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("demo: -html: %w", err)
	}
	return nil
}

// checkWritableDir reports whether a file can be created beside path.
func checkWritableDir(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".idem-demo-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

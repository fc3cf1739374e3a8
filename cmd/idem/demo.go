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

type demoCommand struct {
	*Main
}

func (c *demoCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	seed := fs.Uint64("seed", 1, "seed of the faults and the transfers")
	intents := fs.Int("intents", 300, "transfers decided per mode")
	clients := fs.Int("clients", 8, "concurrent clients")
	kills := fs.Int("kills", 3, "times the server is killed with SIGKILL per mode (0: never)")
	db := fs.String("db", "", "postgres:// URL to run on PostgreSQL (a fresh schema per mode); empty for SQLite")
	asJSON := fs.Bool("json", false, "print the reports as JSON")
	verbose := fs.Bool("v", false, "show the servers' logs")
	htmlOut := fs.String("html", "", "also write the run as one self-contained HTML page to this file: the modes side by side, a timeline of every intent's attempts, faults, kills and replays, and the table")
	if err := c.parse(fs, args, "demo [--seed N] [--intents N] [--json] [--html report.html]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("demo: unexpected argument %q (run \"idem demo -h\")", fs.Arg(0))}
	}
	if *intents <= 0 || *clients <= 0 || *kills < 0 {
		return usageError{"demo: -intents and -clients must be positive and -kills not negative"}
	}
	if *db != "" && !isPostgres(*db) {
		return usageError{fmt.Sprintf("demo: -db must be a postgres:// URL, got %q", *db)}
	}
	if *htmlOut != "" {
		// Fail before a run of a minute, not after it: the page's
		// directory must take a file.
		if err := checkWritableDir(*htmlOut); err != nil {
			return usageError{fmt.Sprintf("demo: --html %s: %v", *htmlOut, err)}
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	k := *kills
	if k == 0 {
		k = -1
	}
	cfg := &demo.Config{
		Binary: self, DB: *db, Seed: *seed, Intents: *intents, Clients: *clients, Kills: k,
		Progress: c.Stderr,
	}
	if *verbose {
		cfg.ServerLog = c.Stderr
	}
	fmt.Fprintf(c.Stderr, "idem demo: %d transfers per mode from %d impatient clients (timeout %s), over a network that drops, delays and resets; the server is killed with SIGKILL %d times per mode\n",
		*intents, *clients, 300*time.Millisecond, *kills)
	reports, err := demo.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *htmlOut != "" {
		if err := writeDemoHTML(*htmlOut, reports, demo.HTMLInfo{Seed: *seed, Intents: *intents, Clients: *clients, Kills: *kills}); err != nil {
			return err
		}
		fmt.Fprintf(c.Stderr, "idem demo: wrote %s\n", *htmlOut)
	}
	if *asJSON {
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

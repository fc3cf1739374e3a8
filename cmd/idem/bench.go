package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/bench"
)

const benchSynopsis = "bench [-db <sqlite | sqlite-path | postgres://… | mysql://…>]… [--json] [-duration 3s] [-concurrency 1,8,32] [-storms 20] [-pool 16] [-replay-probe] [-probe-conns 2] [-live-records 0] [-cpuprofile file]"

type benchCommand struct {
	*Main
}

// benchOptions is idem bench's command line.
type benchOptions struct {
	commandLine
	dbs                      []string
	duration                 time.Duration
	levels                   string
	storms, probeConns, pool int
	live                     string

	// Set by validate.
	liveRecords            []int // of -live-records
	probe, asJSON, verbose bool
	cpuProfile             string

	// Set by validate.
	concurrency []int // of -concurrency
}

func (o *benchOptions) flags(fs *flag.FlagSet) {
	fs.Func("db", "a SQLite file path, \"sqlite\" for a fresh SQLite file in a temporary directory, a postgres:// URL (the run works in a fresh schema and drops it), or a mysql:// URL (a fresh database, dropped); repeat it to measure several databases in one run, side by side (default sqlite)", func(v string) error {
		o.dbs = append(o.dbs, v)
		return nil
	})
	fs.DurationVar(&o.duration, "duration", bench.DefaultDuration, "measured time of each variant at each concurrency level")
	fs.StringVar(&o.levels, "concurrency", "1,8,32", "comma-separated numbers of concurrent clients of the overhead and replay scenarios")
	fs.IntVar(&o.storms, "storms", bench.DefaultStorms, "duplicate storms of 100 requests with one key (and as many storms of reads)")
	fs.BoolVar(&o.probe, "replay-probe", false, "on PostgreSQL, turn on pgstore's ReplayProbe (replays and 409s in one round trip)")
	fs.IntVar(&o.probeConns, "probe-conns", 0, "on PostgreSQL, pgstore's ProbeConns: connections reserved for replays and refusals when the pool is exhausted (negative: none; 0: the store's default, 2)")
	fs.IntVar(&o.pool, "pool", defaultPool, "on PostgreSQL, the pool size both services share (pool_max_conns), as idem serve -pool")
	fs.StringVar(&o.live, "live-records", "0", "comma-separated numbers of live records written into the records table before a run, as a service that has kept a day of keys has them: each database is measured once per number, side by side (the report gives the table's size per record)")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&o.verbose, "v", false, "show the services' logs")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (clients and servers) to this file, for go tool pprof")
}

func (o *benchOptions) validate() error {
	if err := o.noArgs("bench"); err != nil {
		return err
	}
	for _, db := range o.dbs {
		if err := needSQL("bench", db, "bench measures the transfers service, whose records and ledger are in SQL"); err != nil {
			return err
		}
	}
	var err error
	if o.concurrency, err = parseLevels(o.levels); err != nil {
		return usageError{"bench: -concurrency: " + err.Error()}
	}
	o.liveRecords = nil
	for f := range strings.SplitSeq(o.live, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return usageError{fmt.Sprintf("bench: -live-records: want comma-separated numbers of at least 0, got %q", o.live)}
		}
		o.liveRecords = append(o.liveRecords, n)
	}
	if o.duration <= 0 || o.storms <= 0 || o.pool <= 0 {
		return usageError{"bench: -duration, -storms and -pool must be positive"}
	}
	return nil
}

// Run parses args, validates them and runs idem bench.
func (c *benchCommand) Run(ctx context.Context, args []string) error {
	o := new(benchOptions)
	if err := c.parseOptions("bench", benchSynopsis, flagsFirst, args, o); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	return c.run(ctx, o)
}

func (c *benchCommand) run(ctx context.Context, o *benchOptions) error {
	dbs := o.dbs
	if len(dbs) == 0 {
		dbs = []string{"sqlite"}
	}
	fmt.Fprintf(c.Stderr, "idem bench: overhead, replays and duplicate storms at %v clients, %s per variant and level, %d storms per scenario, on %d database(s)\n",
		o.concurrency, o.duration, o.storms, len(dbs))
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var (
		reps   []*bench.Report
		broken error
	)
	type run struct {
		db   string
		live int
	}
	var runs []run
	for _, db := range dbs {
		for _, n := range o.liveRecords {
			runs = append(runs, run{db, n})
		}
	}
	for _, ru := range runs {
		db := ru.db
		if db == "sqlite" {
			db = ""
		}
		cfg := &bench.Config{DB: db, Duration: o.duration, Concurrency: o.concurrency, Storms: o.storms, ReplayProbe: o.probe, ProbeConns: o.probeConns, Pool: o.pool, LiveRecords: ru.live, Progress: c.Stderr}
		if o.verbose {
			cfg.ServerLog = c.Stderr
		}
		rep, err := bench.Run(ctx, cfg)
		if rep == nil {
			return err
		}
		if errors.Is(err, bench.ErrInvariant) {
			broken = errors.Join(broken, err)
		} else if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	if o.asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		// One database: its report; several: {"reports": [...]}.
		var v any = reps[0]
		if len(reps) > 1 {
			v = struct {
				Reports []*bench.Report `json:"reports"`
			}{reps}
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
	} else {
		for _, rep := range reps {
			fmt.Fprintln(c.Stdout)
			if err := bench.WriteTable(c.Stdout, rep); err != nil {
				return err
			}
		}
		if len(reps) > 1 {
			fmt.Fprintln(c.Stdout, "\nside by side:")
			if err := bench.WriteSummary(c.Stdout, reps); err != nil {
				return err
			}
		}
		fmt.Fprintln(c.Stdout, "\nA missed bar is a measurement, not a failure; a broken invariant (a storm with other than one effect) fails the command.")
	}
	if broken != nil {
		return fmt.Errorf("bench: %w", broken)
	}
	return nil
}

// parseLevels parses "1,8,32".
func parseLevels(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("want positive numbers separated by commas, got %q", s)
		}
		out = append(out, n)
	}
	return out, nil
}

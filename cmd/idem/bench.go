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

	"github.com/idemkit/idem/cmd/idem/internal/bench"
)

type benchCommand struct {
	*Main
}

func (c *benchCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var dbs []string
	fs.Func("db", "a SQLite file path, \"sqlite\" for a fresh SQLite file in a temporary directory, or a postgres:// URL (the run works in a fresh schema and drops it); repeat it to measure several databases in one run, side by side (default sqlite)", func(v string) error {
		dbs = append(dbs, v)
		return nil
	})
	duration := fs.Duration("duration", bench.DefaultDuration, "measured time of each variant at each concurrency level")
	levels := fs.String("concurrency", "1,8,32", "comma-separated numbers of concurrent clients of the overhead and replay scenarios")
	storms := fs.Int("storms", bench.DefaultStorms, "duplicate storms of 100 requests with one key (and as many storms of reads)")
	probe := fs.Bool("replay-probe", false, "on PostgreSQL, turn on pgstore's ReplayProbe (replays and 409s in one round trip)")
	probeConns := fs.Int("probe-conns", 0, "on PostgreSQL, pgstore's ProbeConns: connections reserved for replays and refusals when the pool is exhausted (negative: none; 0: the store's default, 2)")
	pool := fs.Int("pool", defaultPool, "on PostgreSQL, the pool size both services share (pool_max_conns), as idem serve -pool")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	verbose := fs.Bool("v", false, "show the services' logs")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (clients and servers) to this file, for go tool pprof")
	if err := c.parse(fs, args, "bench [-db <sqlite | sqlite-path | postgres://…>]… [--json] [-duration 3s] [-concurrency 1,8,32] [-storms 20] [-pool 16] [-replay-probe] [-probe-conns 2] [-cpuprofile file]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("bench: unexpected argument %q (run \"idem bench -h\")", fs.Arg(0))}
	}
	for _, db := range dbs {
		if err := needSQL("bench", db, "bench measures the transfers service, whose records and ledger are in SQL"); err != nil {
			return err
		}
	}
	conc, err := parseLevels(*levels)
	if err != nil {
		return usageError{"bench: -concurrency: " + err.Error()}
	}
	if *duration <= 0 || *storms <= 0 || *pool <= 0 {
		return usageError{"bench: -duration, -storms and -pool must be positive"}
	}
	if len(dbs) == 0 {
		dbs = []string{"sqlite"}
	}
	fmt.Fprintf(c.Stderr, "idem bench: overhead, replays and duplicate storms at %v clients, %s per variant and level, %d storms per scenario, on %d database(s)\n",
		conc, *duration, *storms, len(dbs))
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
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
	for _, db := range dbs {
		if db == "sqlite" {
			db = ""
		}
		cfg := &bench.Config{DB: db, Duration: *duration, Concurrency: conc, Storms: *storms, ReplayProbe: *probe, ProbeConns: *probeConns, Pool: *pool, Progress: c.Stderr}
		if *verbose {
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
	if *asJSON {
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

package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the report as a table with a few lines of context.
func WriteTable(w io.Writer, rep *Report) error {
	m := rep.Machine
	probe := ""
	if rep.ReplayProbe {
		probe = ", pgstore ReplayProbe on"
	}
	fmt.Fprintf(w, "backend:  %s %s, pool of %d connections shared by both services%s\n", rep.Backend, rep.Database, rep.PoolSize, probe)
	fmt.Fprintf(w, "machine:  %d CPUs (GOMAXPROCS %d), %s/%s, %s; clients and servers in one process, HTTP on loopback\n",
		m.CPUs, m.GOMAXPROCS, m.OS, m.Arch, m.Go)
	if r := rep.Records; r != nil {
		fmt.Fprintf(w, "records:  %d live records written before the run (%.0fs): %.0f B per record on disk, table %.0f B + indexes %.0f B",
			r.Live, r.Seconds, r.PerRow, r.Heap, r.Indexes)
		for _, i := range r.ByIndex {
			fmt.Fprintf(w, "; %s %.0f B", i.Name, i.PerRecord)
		}
		if r.RowBytes > 0 {
			fmt.Fprintf(w, "; a row %.0f B", r.RowBytes)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "measured: %s per variant and level, in %d alternating rounds (A B B A …); started %s, took %s\n\n",
		rep.Duration, rep.Rounds, rep.Started, rep.Elapsed)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tclients\tvariant\trequests\terrors\treq/s\tp50\tp99\tratio\tbar\tverdict")
	row := func(scenario string, c int, v Variant, rps bool, tail string) {
		r := "-"
		if rps {
			r = strconv.FormatFloat(v.ReqPerSec, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n",
			scenario, c, v.Name, v.Requests, v.Errors, r, fmtMs(v.P50Ms), fmtMs(v.P99Ms), tail)
	}
	for _, group := range [][]Comparison{rep.Overhead, rep.Replay, rep.ReplayStore} {
		for _, cmp := range group {
			row(cmp.Scenario, cmp.Concurrency, cmp.Base, true, "\t\t")
			row(cmp.Scenario, cmp.Concurrency, cmp.Subject, true,
				fmt.Sprintf("%.2f× req/s\t%s\t%s", cmp.Ratio, cmp.Bar, cmp.Bar.Verdict()))
		}
	}
	for _, v := range rep.storms() {
		if v.st == nil {
			continue
		}
		st := v.st
		row(v.name, st.Size, st.Reads, false, "\t\t")
		row(v.name, st.Size, st.Answers, false, fmt.Sprintf("%.2f× p99\t%s\t%s", st.Ratio, st.Bar, st.Bar.Verdict()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	for _, v := range rep.storms() {
		if v.st == nil {
			fmt.Fprintf(w, "%s: %s\n", v.name, rep.StormTwoNote)
			continue
		}
		st := v.st
		fmt.Fprintf(w, "%s: %d storms of %d requests with one key each, over %d instance(s): %d effects (want %d); the others answered %d × 409, %d × replay, %d × other;\n",
			v.name, st.Storms, st.Size, st.Instances, st.Effects, st.Storms, st.InFlight, st.Replayed, st.Other)
		fmt.Fprintf(w, "        median over storms of p99 answers ÷ p99 of the adjacent read storm: %.2f×\n", st.MedianPairRatio)
	}
	g := rep.Guard
	fmt.Fprintf(w, "guard:  replay cache %d hits, %d misses (%d bytes held at the end); %d duplicates refused in process\n",
		g.ReplayCacheHits, g.ReplayCacheMisses, g.ReplayCacheBytes, g.LocalInFlight)
	conserved := "money conserved"
	if !rep.Ledger.Conserved {
		conserved = "MONEY NOT CONSERVED"
	}
	fmt.Fprintf(w, "ledger: %d transfers written, %d answered 201 (not replayed); %s\n",
		rep.Ledger.Transfers, rep.Ledger.Created, conserved)
	if errs := errorStatuses(rep); errs != "" {
		fmt.Fprintf(w, "errors: %s\n", errs)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "INVARIANT BROKEN: %s\n", p)
	}
	return nil
}

// errorStatuses lists the unexpected answers per variant, if any.
func errorStatuses(rep *Report) string {
	var parts []string
	add := func(where string, v Variant, expected ...string) {
		if v.Errors == 0 {
			return
		}
		var s []string
		for _, k := range slices.Sorted(maps.Keys(v.Statuses)) {
			if !slices.Contains(expected, k) {
				s = append(s, fmt.Sprintf("%d × %s", v.Statuses[k], k))
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s: %s", where, v.Name, strings.Join(s, ", ")))
	}
	for _, c := range rep.Overhead {
		add(fmt.Sprintf("overhead c=%d", c.Concurrency), c.Base, "201")
		add(fmt.Sprintf("overhead c=%d", c.Concurrency), c.Subject, "201")
	}
	for _, c := range append(slices.Clone(rep.Replay), rep.ReplayStore...) {
		add(fmt.Sprintf("%s c=%d", c.Scenario, c.Concurrency), c.Base, "201")
		add(fmt.Sprintf("%s c=%d", c.Scenario, c.Concurrency), c.Subject, "201 replayed")
	}
	for _, v := range rep.storms() {
		if v.st != nil {
			add(v.name, v.st.Reads, "200")
			add(v.name, v.st.Answers, "409", "201 replayed")
		}
	}
	return strings.Join(parts, "; ")
}

// fmtMs prints a latency in milliseconds with about three significant
// digits.
func fmtMs(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.2fms", v)
	}
}

// WriteSummary writes the ratios of several runs (one per database) side
// by side, each judged against its bar.
func WriteSummary(w io.Writer, reps []*Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "scenario\tclients\tbar")
	anyLive := false
	for _, rep := range reps {
		anyLive = anyLive || rep.Records != nil
	}
	for _, rep := range reps {
		switch {
		case rep.Records != nil:
			fmt.Fprintf(tw, "\t%s, %d live", rep.Backend, rep.Records.Live)
		case anyLive:
			fmt.Fprintf(tw, "\t%s, 0 live", rep.Backend)
		default:
			fmt.Fprintf(tw, "\t%s", rep.Backend)
		}
	}
	fmt.Fprintln(tw)
	cell := func(ratio float64, b Bar, unit string) string {
		return fmt.Sprintf("%.2f× %s %s", ratio, unit, b.Verdict())
	}
	type line struct {
		scenario, clients, bar string
		cells                  []string
	}
	var lines []line
	find := func(scenario, clients, bar string) *line {
		for i := range lines {
			if lines[i].scenario == scenario && lines[i].clients == clients {
				return &lines[i]
			}
		}
		lines = append(lines, line{scenario, clients, bar, make([]string, len(reps))})
		return &lines[len(lines)-1]
	}
	for i, rep := range reps {
		for _, group := range [][]Comparison{rep.Overhead, rep.Replay, rep.ReplayStore} {
			for _, c := range group {
				find(c.Scenario, strconv.Itoa(c.Concurrency), c.Bar.String()).cells[i] = cell(c.Ratio, c.Bar, "req/s")
			}
		}
		for _, v := range rep.storms() {
			l := find(v.name, "100", "≤ 1.5 (p99); one effect per key")
			if v.st == nil {
				l.cells[i] = "n/a"
				continue
			}
			effects := "one effect per key"
			if v.st.Effects != int64(v.st.Storms) || v.st.Executed != v.st.Storms {
				effects = "EFFECTS WRONG"
			}
			l.cells[i] = cell(v.st.Ratio, v.st.Bar, "p99") + ", " + effects
		}
	}
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%s\t%s", l.scenario, l.clients, l.bar)
		for _, c := range l.cells {
			if c == "" {
				c = "-"
			}
			fmt.Fprintf(tw, "\t%s", c)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tiny is a run short enough for a unit test: the invariants are checked,
// never the timings.
func tiny(db string) *Config {
	return &Config{
		DB:          db,
		Duration:    80 * time.Millisecond,
		Rounds:      2,
		Concurrency: []int{1, 8},
		Storms:      3,
	}
}

// checkReport asserts what every run must show whatever the machine: the
// fields are filled, each storm had exactly one effect and answered every
// other request 409 or with a replay, and the ledger matches the answers.
func checkReport(t *testing.T, rep *Report, cfg *Config) {
	t.Helper()
	if len(rep.Problems) != 0 {
		t.Errorf("Problems = %q, want none", rep.Problems)
	}
	if rep.Backend == "" || rep.Database == "" || rep.PoolSize <= 0 || rep.Machine.CPUs <= 0 || rep.Elapsed == "" {
		t.Errorf("report header not filled: %+v", rep)
	}
	for _, group := range [][]Comparison{rep.Overhead, rep.Replay, rep.ReplayStore} {
		if got, want := len(group), len(cfg.Concurrency); got != want {
			t.Fatalf("got %d comparisons, want %d", got, want)
		}
		for i, c := range group {
			if c.Concurrency != cfg.Concurrency[i] {
				t.Errorf("%s: Concurrency = %d, want %d", c.Scenario, c.Concurrency, cfg.Concurrency[i])
			}
			for _, v := range []Variant{c.Base, c.Subject} {
				if v.Requests == 0 || v.Seconds <= 0 || v.ReqPerSec <= 0 || v.P50Ms <= 0 || v.P99Ms < v.P50Ms {
					t.Errorf("%s c=%d %s: variant not filled: %+v", c.Scenario, c.Concurrency, v.Name, v)
				}
				if v.Errors != 0 {
					t.Errorf("%s c=%d %s: %d errors: %v", c.Scenario, c.Concurrency, v.Name, v.Errors, v.Statuses)
				}
			}
			if c.Ratio <= 0 || c.Bar.Op != ">=" {
				t.Errorf("%s c=%d: Ratio = %v, Bar = %+v", c.Scenario, c.Concurrency, c.Ratio, c.Bar)
			}
		}
	}
	for _, c := range append(rep.Replay, rep.ReplayStore...) {
		if got := c.Subject.Statuses["201 replayed"]; got != c.Subject.Requests {
			t.Errorf("%s c=%d: %d replays of %d requests", c.Scenario, c.Concurrency, got, c.Subject.Requests)
		}
	}
	// The replays of the first scenario come from the Guard's cache.
	if rep.Guard.ReplayCacheHits == 0 || rep.Guard.ReplayCacheMisses == 0 {
		t.Errorf("Guard counters = %+v, want cache hits and misses", rep.Guard)
	}

	created := checkStorm(t, "storm", rep.Storm, cfg, 1) + checkStorm(t, "storm-store", rep.StormStore, cfg, 1)
	if rep.StormTwo != nil {
		created += checkStorm(t, "storm-two", *rep.StormTwo, cfg, 2)
	}

	// Every 201 that was not a replay is one row, and no other row exists.
	for _, c := range rep.Overhead {
		created += int64(c.Base.Requests + c.Subject.Requests)
	}
	for _, c := range append(rep.Replay, rep.ReplayStore...) {
		created += int64(c.Base.Requests)
	}
	if rep.Ledger.Transfers != rep.Ledger.Created {
		t.Errorf("ledger: %d transfers written, %d created answers", rep.Ledger.Transfers, rep.Ledger.Created)
	}
	// The unmeasured warm-up rounds also create transfers.
	if rep.Ledger.Created < created {
		t.Errorf("ledger: %d created answers, fewer than the %d measured", rep.Ledger.Created, created)
	}
	if !rep.Ledger.Conserved {
		t.Error("ledger: money not conserved")
	}
}

// checkStorm asserts a storm scenario's invariants and returns its
// executions.
func checkStorm(t *testing.T, name string, st Storm, cfg *Config, instances int) int64 {
	t.Helper()
	if st.Instances != instances {
		t.Errorf("%s: over %d instances, want %d", name, st.Instances, instances)
	}
	if st.Storms != cfg.Storms || st.Size != DefaultStormSize {
		t.Errorf(name+": %d storms of %d, want %d of %d", st.Storms, st.Size, cfg.Storms, DefaultStormSize)
	}
	if got, want := st.Effects, int64(cfg.Storms); got != want {
		t.Errorf(name+": %d effects, want exactly one per storm: %d", got, want)
	}
	if got, want := st.Executed, cfg.Storms; got != want {
		t.Errorf(name+": %d executions, want %d", got, want)
	}
	if st.Other != 0 {
		t.Errorf(name+": %d answers neither 409 nor a replay", st.Other)
	}
	if got, want := st.InFlight+st.Replayed, cfg.Storms*(DefaultStormSize-1); got != want {
		t.Errorf(name+": %d answers 409 or replayed, want %d", got, want)
	}
	if got, want := st.Answers.Requests, cfg.Storms*(DefaultStormSize-1); got != want {
		t.Errorf(name+": %d answers sampled, want %d", got, want)
	}
	if got, want := st.Reads.Requests, cfg.Storms*DefaultStormSize; got != want {
		t.Errorf(name+": %d reads, want %d", got, want)
	}
	if st.Answers.P99Ms <= 0 || st.Reads.P99Ms <= 0 || st.Ratio <= 0 || st.MedianPairRatio <= 0 {
		t.Errorf(name+": percentiles not filled: %+v", st)
	}

	return int64(st.Executed)
}

func TestRunSQLite(t *testing.T) {
	t.Parallel()
	cfg := tiny("")
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Backend != "sqlite" {
		t.Errorf("Backend = %q, want sqlite", rep.Backend)
	}
	checkReport(t, rep, cfg)
	for _, c := range rep.Overhead {
		if c.Bar.Applies {
			t.Errorf("overhead c=%d: the PostgreSQL bar applies on SQLite", c.Concurrency)
		}
	}
	if rep.StormTwo != nil || !strings.Contains(rep.StormTwoNote, "n/a") {
		t.Errorf("storm over two instances on SQLite: %+v %q, want none and a note", rep.StormTwo, rep.StormTwoNote)
	}
	if !strings.Contains(progress.String(), "storm:") {
		t.Errorf("progress has no storm line:\n%s", progress.String())
	}

	t.Run("Table", func(t *testing.T) {
		var buf bytes.Buffer
		if err := WriteTable(&buf, rep); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"overhead", "replay", "replay-store", "storm", "storm-store", "storm-two: n/a", "409 or replay", "guard:", "ledger:", "money conserved"} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, buf.String())
			}
		}
		if strings.Contains(buf.String(), "INVARIANT") {
			t.Errorf("table reports a broken invariant:\n%s", buf.String())
		}
	})
	t.Run("JSON", func(t *testing.T) {
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var back Report
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Storm.Effects != rep.Storm.Effects || len(back.Overhead) != len(rep.Overhead) || back.Problems == nil {
			t.Errorf("JSON round trip lost fields: %s", b)
		}
	})
}

// A SQLite file given by path is used as it is and kept: a second run on
// it still audits only its own transfers.
func TestRunSQLiteFileTwice(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bench.db")
	cfg := tiny(path)
	cfg.Concurrency = []int{2}
	cfg.Storms = 1
	for range 2 {
		rep, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkReport(t, rep, cfg)
		if rep.Database != path {
			t.Errorf("Database = %q, want %q", rep.Database, path)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Run(ctx, tiny("")); err == nil {
		t.Error("Run with a cancelled context: err = nil, want an error")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"NegativeDuration", Config{Duration: -time.Second}},
		{"NegativeRounds", Config{Rounds: -1}},
		{"ZeroConcurrency", Config{Concurrency: []int{1, 0}}},
		{"NegativeStorms", Config{Storms: -1}},
		{"StormOfOne", Config{StormSize: 1}},
		{"NegativeLiveRecords", Config{LiveRecords: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Run(t.Context(), &tt.cfg); err == nil {
				t.Errorf("Run(%+v): err = nil, want a Config error", tt.cfg)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tt := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"Empty", nil, 0.5, 0},
		{"One", ms(7), 0.99, 7 * time.Millisecond},
		{"MedianOdd", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"MedianEven", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"P99Of100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"P100", ms(1, 2, 3), 1, 3 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestBar(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		bar     Bar
		verdict string
	}{
		{"AtLeastPass", newBar(">=", 0.85, 0.9, true, ""), "pass"},
		{"AtLeastEqual", newBar(">=", 3, 3, true, ""), "pass"},
		{"AtLeastMiss", newBar(">=", 3, 2.9, true, ""), "MISS"},
		{"AtMostPass", newBar("<=", 2, 1.5, true, ""), "pass"},
		{"AtMostMiss", newBar("<=", 2, 2.1, true, ""), "MISS"},
		{"AtMostNoData", newBar("<=", 2, 0, true, ""), "MISS"},
		{"NotApplicable", newBar(">=", 0.85, 0.1, false, "PostgreSQL"), "n/a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.bar.Verdict(); got != tt.verdict {
				t.Errorf("Verdict() = %q, want %q", got, tt.verdict)
			}
		})
	}
}

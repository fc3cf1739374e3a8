package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

// Config configures Run. The zero value, and a nil *Config, mean defaults.
type Config struct {
	// DB is a SQLite file path or a postgres:// URL. On PostgreSQL the run
	// works in a fresh schema that it drops at the end. Defaults to a fresh
	// SQLite file in a temporary directory, removed at the end.
	DB string

	// Duration is the measured time of each variant at each concurrency
	// level, split into Rounds rounds. Defaults to 3 seconds.
	Duration time.Duration

	// Rounds is the number of rounds per variant and level; the two
	// variants of a scenario alternate A B B A A B B A …. Defaults to 4.
	Rounds int

	// Concurrency lists the numbers of concurrent clients of the overhead
	// and replay scenarios. Defaults to 1, 8 and 32.
	Concurrency []int

	// Storms is the number of duplicate storms (each with its own key),
	// and of read storms. Defaults to 20.
	Storms int

	// StormSize is the number of concurrent requests in one storm.
	// Defaults to 100.
	StormSize int

	// ReplayProbe turns on pgstore.Config.ReplayProbe on PostgreSQL: a
	// replay or an in-flight refusal then costs one round trip instead of
	// two, a first execution one more. Ignored on SQLite. Defaults to
	// false, the store's default.
	ReplayProbe bool

	// Pool is the size of the PostgreSQL pool both services share
	// (pgxpool's pool_max_conns). Ignored on SQLite. Defaults to pgxpool's
	// default, the larger of 4 and the number of CPUs.
	Pool int

	// ProbeConns sets pgstore.Config.ProbeConns on PostgreSQL (negative:
	// none). Ignored on SQLite. Defaults to 0, the store's default.
	ProbeConns int

	// LiveRecords is the number of live records written into the records
	// table before the measurement (in batches, by the database itself),
	// as a service that has kept a day of keys has them; the report gives
	// the table's size per record. Defaults to 0, an empty table.
	LiveRecords int

	// Progress, when set, receives a line as each measurement ends.
	// Defaults to none.
	Progress io.Writer

	// ServerLog, when set, receives the services' log lines (idemhttp logs
	// every in-flight refusal and replay). Defaults to none.
	ServerLog io.Writer
}

// Defaults of Config.
const (
	DefaultDuration  = 3 * time.Second
	DefaultRounds    = 4
	DefaultStorms    = 20
	DefaultStormSize = 100
)

// DefaultConcurrency is the default of Config.Concurrency.
var DefaultConcurrency = []int{1, 8, 32}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Duration == 0 {
		out.Duration = DefaultDuration
	}
	if out.Rounds == 0 {
		out.Rounds = DefaultRounds
	}
	if len(out.Concurrency) == 0 {
		out.Concurrency = DefaultConcurrency
	}
	out.Concurrency = slices.Clone(out.Concurrency)
	if out.Storms == 0 {
		out.Storms = DefaultStorms
	}
	if out.StormSize == 0 {
		out.StormSize = DefaultStormSize
	}
	return out, out.validate()
}

func (c *Config) validate() error {
	switch {
	case c.Duration < 0:
		return fmt.Errorf("bench: Config.Duration must be positive, got %s", c.Duration)
	case c.Rounds < 0:
		return fmt.Errorf("bench: Config.Rounds must be positive, got %d", c.Rounds)
	case c.Storms < 0:
		return fmt.Errorf("bench: Config.Storms must be positive, got %d", c.Storms)
	case c.LiveRecords < 0:
		return fmt.Errorf("bench: Config.LiveRecords must not be negative, got %d", c.LiveRecords)
	case c.StormSize < 2:
		return fmt.Errorf("bench: Config.StormSize must be at least 2, got %d", c.StormSize)
	}
	for _, n := range c.Concurrency {
		if n <= 0 {
			return fmt.Errorf("bench: Config.Concurrency must list positive numbers, got %d", n)
		}
	}
	return nil
}

// ErrInvariant is matched (errors.Is) by the error Run returns when the
// service broke a rule while measured: a storm applied other than exactly
// one transfer, an answer was neither 409 nor a replay, a replay differed
// from the original, or the ledger disagrees with what the clients saw.
var ErrInvariant = errors.New("bench: invariant broken")

// Run measures the scenarios and returns the report. When an invariant
// breaks, it still returns the full report, with an error matching
// ErrInvariant; other errors (the database cannot be opened, ctx is
// cancelled) come with a nil report.
func Run(ctx context.Context, cfg *Config) (*Report, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	b, err := open(ctx, c.DB, c.ReplayProbe, c.Pool, c.ProbeConns)
	if err != nil {
		return nil, err
	}
	defer b.close(context.WithoutCancel(ctx))

	var records *Records
	if c.LiveRecords > 0 {
		if c.Progress != nil {
			fmt.Fprintf(c.Progress, "writing %d live records…\n", c.LiveRecords)
		}
		if records, err = b.prefill(ctx, c.LiveRecords); err != nil {
			return nil, err
		}
		if c.Progress != nil {
			fmt.Fprintf(c.Progress, "%d live records written in %.0fs\n", c.LiveRecords, records.Seconds)
		}
	}

	r, err := newRunner(ctx, c, b)
	if err != nil {
		return nil, err
	}
	defer r.stop()

	rep := &Report{
		Backend:     b.kind,
		ReplayProbe: b.probe,
		Database:    b.desc,
		PoolSize:    b.pool,
		Machine:     machine(),
		Duration:    c.Duration.String(),
		Rounds:      c.Rounds,
		Concurrency: c.Concurrency,
		Started:     started.UTC().Format(time.RFC3339),
		Records:     records,
	}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	if err := r.overhead(ctx, rep); err != nil {
		return nil, err
	}
	if err := r.replay(ctx, rep); err != nil {
		return nil, err
	}
	if err := r.storms(ctx, rep); err != nil {
		return nil, err
	}
	if err := r.audit(ctx, rep); err != nil {
		return nil, err
	}
	gs := r.guard.Stats()
	rep.Guard = GuardCounters{ReplayCacheHits: gs.ReplayCacheHits, ReplayCacheMisses: gs.ReplayCacheMisses,
		ReplayCacheBytes: gs.ReplayCacheBytes, LocalInFlight: gs.LocalInFlight}
	rep.Elapsed = time.Since(started).Round(time.Millisecond).String()
	rep.Problems = r.problemList()
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("%w: %s", ErrInvariant, rep.Problems[0])
	}
	return rep, nil
}

// runner holds what the scenarios share: the two services on one backend,
// the HTTP client and the counters of the audit.
type runner struct {
	cfg   Config
	b     *backend
	idem  *httptest.Server // the transfers service with idem
	plain *httptest.Server // the same service with a nil Guard
	// storeOnly is the service with a Guard whose in-process shortcuts
	// are off, on the same store: every call reaches the store.
	storeOnly *httptest.Server
	// idem2 is a second instance of the idem service, with a store, pool
	// and Guard of its own, on the same database; nil on SQLite.
	idem2   *httptest.Server
	guard   *idem.Guard
	tr      *http.Transport
	client  *client
	runID   string
	created atomic.Int64 // transfers the clients were told were created (201, not replayed)

	ledgerBefore int64

	mu       sync.Mutex
	problems []string
}

func newRunner(ctx context.Context, c Config, b *backend) (*runner, error) {
	// Without ServerLog, a handler that is never enabled: the services
	// do not format lines nobody reads (idemhttp logs every replay and
	// refusal at Info).
	log := slog.New(slog.DiscardHandler)
	if c.ServerLog != nil {
		log = slog.New(slog.NewTextHandler(c.ServerLog, nil))
	}
	g, err := idem.New(b.store, nil)
	if err != nil {
		return nil, err
	}
	withIdem, err := transfers.New(ctx, b.ledger, &transfers.Config{Guard: g, Logger: log})
	if err != nil {
		return nil, err
	}
	plain, err := transfers.New(ctx, b.ledger, &transfers.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	gStore, err := idem.New(b.store, &idem.Config{ReplayCacheBytes: -1, DisableLocalInFlight: true})
	if err != nil {
		return nil, err
	}
	storeOnly, err := transfers.New(ctx, b.ledger, &transfers.Config{Guard: gStore, Logger: log})
	if err != nil {
		return nil, err
	}
	var second http.Handler
	if b.second != nil {
		s2, ledger2, err := b.second(ctx)
		if err != nil {
			return nil, err
		}
		g2, err := idem.New(s2, nil)
		if err != nil {
			return nil, err
		}
		if second, err = transfers.New(ctx, ledger2, &transfers.Config{Guard: g2, Logger: log}); err != nil {
			return nil, err
		}
	}
	// Enough idle connections that a storm never opens new ones, on
	// either server.
	idle := max(c.StormSize, slices.Max(c.Concurrency)) + 16
	tr := &http.Transport{
		MaxIdleConns:        4 * idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	r := &runner{
		cfg:       c,
		b:         b,
		idem:      httptest.NewServer(withIdem),
		plain:     httptest.NewServer(plain),
		storeOnly: httptest.NewServer(storeOnly),
		guard:     g,
		tr:        tr,
		client:    &client{hc: &http.Client{Transport: tr, Timeout: time.Minute}, token: "bench"},
		runID:     strconv.FormatInt(time.Now().UnixNano(), 36),
	}
	if second != nil {
		r.idem2 = httptest.NewServer(second)
	}
	return r, nil
}

func (r *runner) stop() {
	r.tr.CloseIdleConnections()
	r.idem.Close()
	r.plain.Close()
	r.storeOnly.Close()
	if r.idem2 != nil {
		r.idem2.Close()
	}
}

func (r *runner) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, format+"\n", args...)
	}
}

// roundTime is the length of one measured round.
func (r *runner) roundTime() time.Duration {
	return max(r.cfg.Duration/time.Duration(r.cfg.Rounds), time.Millisecond)
}

// warmTime is the length of the unmeasured round that precedes each level.
func (r *runner) warmTime() time.Duration {
	return min(r.roundTime(), 250*time.Millisecond)
}

// maxProblems bounds the problems kept for the report; the count of the
// others is added at the end.
const maxProblems = 20

// problem records a broken invariant.
func (r *runner) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

func (r *runner) problemList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) <= maxProblems {
		return append([]string{}, r.problems...)
	}
	out := append([]string{}, r.problems[:maxProblems]...)
	return append(out, fmt.Sprintf("… and %d more", len(r.problems)-maxProblems))
}

func machine() Machine {
	return Machine{
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		Go:         runtime.Version(),
	}
}

// Package demo reproduces the incident behind idem: impatient clients retry
// POST /transfers over a faulty network while the server is killed and
// restarted, and the ledger is audited afterwards. It runs the same seeded
// scenario in three modes so that the difference is idem alone. The idem
// command's "demo" sub-command is a thin shell over Run.
package demo

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem/idemclient"
	"github.com/idemkit/idem/internal/history"
)

// Mode is how the clients and the server handle retries.
type Mode string

// The three modes of the demo.
const (
	// ModeNoKey sends no key and runs the server with idempotency off:
	// every retry that reaches the server runs again.
	ModeNoKey Mode = "no-key"
	// ModeKeyPerAttempt is the incident's bug: an interceptor that sees
	// single attempts makes a new key for each, so the server never
	// recognises a retry.
	ModeKeyPerAttempt Mode = "key-per-attempt"
	// ModeIdem is idem: one key per intent, reused by every attempt.
	ModeIdem Mode = "idem"
)

// Modes are the modes in the order the demo runs them.
var Modes = []Mode{ModeNoKey, ModeKeyPerAttempt, ModeIdem}

// Config configures Run. The zero value, and a nil *Config, mean defaults,
// except Binary, which is required.
type Config struct {
	// Binary is the idem executable started as the server ("idem serve").
	Binary string

	// DB is the database: "" for a fresh SQLite file per mode in a
	// temporary directory, or a postgres:// URL (each mode then works in a
	// fresh schema of that database). Defaults to "".
	DB string

	// Seed seeds the faults and the transfers. Defaults to 1.
	Seed uint64

	// Intents is the number of transfers the clients decide to make, per
	// mode. Defaults to 300.
	Intents int

	// Clients is the number of concurrent clients. Defaults to 8.
	Clients int

	// Kills is how many times the server is killed with SIGKILL and
	// restarted during each mode; a negative value means never. Defaults
	// to 3.
	Kills int

	// AttemptTimeout is the clients' patience per attempt; the faulty
	// network delays some responses past it. Defaults to 300 ms.
	AttemptTimeout time.Duration

	// Modes are the modes to run. Defaults to Modes.
	Modes []Mode

	// Progress receives progress lines. Defaults to io.Discard.
	Progress io.Writer

	// ServerLog receives the servers' own output. Defaults to io.Discard.
	ServerLog io.Writer
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Binary == "" {
		return out, errors.New("demo: Config.Binary is required")
	}
	if out.Seed == 0 {
		out.Seed = 1
	}
	switch {
	case out.Intents < 0:
		return out, fmt.Errorf("demo: Config.Intents must not be negative, got %d", out.Intents)
	case out.Clients < 0:
		return out, fmt.Errorf("demo: Config.Clients must not be negative, got %d", out.Clients)
	}
	if out.Intents == 0 {
		out.Intents = 300
	}
	if out.Clients == 0 {
		out.Clients = 8
	}
	switch {
	case out.Kills == 0:
		out.Kills = 3
	case out.Kills < 0:
		out.Kills = 0
	}
	if out.AttemptTimeout == 0 {
		out.AttemptTimeout = 300 * time.Millisecond
	}
	if len(out.Modes) == 0 {
		out.Modes = Modes
	}
	for _, m := range out.Modes {
		if m != ModeNoKey && m != ModeKeyPerAttempt && m != ModeIdem {
			return out, fmt.Errorf("demo: unknown mode %q", m)
		}
	}
	if out.Progress == nil {
		out.Progress = io.Discard
	}
	out.Progress = &lockedWriter{w: out.Progress}
	if out.ServerLog == nil {
		out.ServerLog = io.Discard
	}
	out.ServerLog = &lockedWriter{w: out.ServerLog}
	return out, nil
}

// Report is the audit of one mode.
type Report struct {
	Mode       Mode             `json:"mode"`
	Intents    int              `json:"intents"`
	Applied    int              `json:"transfers_applied"`
	Duplicated int              `json:"duplicated"`
	Lost       int              `json:"lost"`
	Conserved  bool             `json:"money_conserved"`
	Correct    bool             `json:"balances_as_intended"`
	Attempts   int64            `json:"attempts"`
	Kills      int              `json:"kills"`
	Faults     map[string]int64 `json:"faults"`
	Seconds    float64          `json:"seconds"`
	// Timeline is what the network saw of the run, for WriteHTML.
	Timeline *Timeline `json:"-"`
	// History is every keyed attempt as the clients saw it, for a
	// linearizability check (internal/history).
	History *history.Recorder `json:"-"`
}

// Run runs the scenario once per mode and returns one report per mode.
func Run(ctx context.Context, cfg *Config) ([]Report, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idem-demo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var reports []Report
	for _, m := range c.Modes {
		db := filepath.Join(dir, string(m)+".db")
		if c.DB != "" {
			var drop func()
			if db, drop, err = freshSchema(ctx, c.DB, m); err != nil {
				return reports, err
			}
			defer drop()
		}
		r, err := runMode(ctx, &c, m, db)
		if err != nil {
			return reports, fmt.Errorf("demo: mode %s: %w", m, err)
		}
		reports = append(reports, r)
	}
	return reports, nil
}

const (
	initialBalance = 1_000_000_000 // cents per account: no transfer is ever declined
	numAccounts    = 4
)

func accountID(i int) string { return fmt.Sprintf("acct-%d", i) }

// plan is the seeded list of intents: intent i moves amount i+1 cents (a
// unique amount, so that the audit can tell each intent's transfers apart).
type planned struct {
	from, to string
	amount   int64
}

func plan(seed uint64, n int) []planned {
	rng := rand.New(rand.NewPCG(seed, 0x7e4))
	out := make([]planned, n)
	for i := range out {
		f := rng.IntN(numAccounts)
		t := (f + 1 + rng.IntN(numAccounts-1)) % numAccounts
		out[i] = planned{accountID(f), accountID(t), int64(i + 1)}
	}
	return out
}

func runMode(ctx context.Context, c *Config, m Mode, db string) (Report, error) {
	start := time.Now()
	addr, err := freeAddr()
	if err != nil {
		return Report{}, err
	}
	idemFlag := "on"
	if m == ModeNoKey {
		idemFlag = "off"
	}
	srv := &server{binary: c.Binary, args: []string{"-db", db, "-idempotency", idemFlag}, addr: addr, log: c.ServerLog}
	if err := srv.start(ctx); err != nil {
		return Report{}, err
	}
	defer srv.stop()
	for i := range numAccounts {
		if err := put(ctx, addr, accountID(i), initialBalance); err != nil {
			return Report{}, err
		}
	}

	tl := newTimeline(c.Intents)
	px := newProxy(addr, c.Seed, c.AttemptTimeout+200*time.Millisecond)
	px.timeline = tl
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Report{}, err
	}
	psrv := &http.Server{Handler: px}
	go psrv.Serve(pln)
	defer psrv.Close()
	base := "http://" + pln.Addr().String()

	var attempts atomic.Int64
	hist := new(history.Recorder)
	transport := &countingTransport{next: hist.Transport(0, &http.Transport{MaxIdleConnsPerHost: 64, DisableKeepAlives: false}), count: &attempts, mode: m}
	client, err := idemclient.New(&idemclient.Config{
		HTTPClient:     &http.Client{Transport: transport},
		AttemptTimeout: c.AttemptTimeout,
		MaxAttempts:    100,
		MaxElapsed:     60 * time.Second,
		BaseDelay:      20 * time.Millisecond,
		MaxDelay:       500 * time.Millisecond,
		Rand:           rand.New(rand.NewPCG(c.Seed, 0xc1)),
	})
	if err != nil {
		return Report{}, err
	}

	intents := plan(c.Seed, c.Intents)
	var done atomic.Int64
	var killed int
	killerDone := make(chan error, 1)
	stopKiller := make(chan struct{})
	go func() {
		// Kill the server each time another share of the intents is done.
		for k := 1; k <= c.Kills; k++ {
			threshold := int64(c.Intents * k / (c.Kills + 1))
			for done.Load() < threshold {
				select {
				case <-stopKiller:
					killerDone <- nil
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			srv.kill()
			tl.kill()
			killed++
			fmt.Fprintf(c.Progress, "  [%s] server killed with SIGKILL (%d/%d), restarting\n", m, k, c.Kills)
			time.Sleep(100 * time.Millisecond)
			if err := srv.start(ctx); err != nil {
				killerDone <- err
				return
			}
		}
		killerDone <- nil
	}()

	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range c.Clients {
		wg.Go(func() {
			for i := range work {
				p := intents[i]
				body := fmt.Appendf(nil, `{"from":%q,"to":%q,"amount":%d}`, p.from, p.to, p.amount)
				in, err := client.NewIntent(http.MethodPost, base+"/transfers", body)
				if err == nil {
					in.Header = http.Header{"Content-Type": {"application/json"}, intentHeader: {strconv.Itoa(i)}}
					_, err = client.Do(ctx, in)
				}
				if err != nil {
					failed.Add(1)
				}
				done.Add(1)
			}
		})
	}
	ticker := time.NewTicker(time.Second)
	stopTicker := make(chan struct{})
	go func() {
		defer ticker.Stop()
		for {
			select {
			case <-ticker.C:
				fmt.Fprintf(c.Progress, "  [%s] %d/%d intents done\n", m, done.Load(), c.Intents)
			case <-stopTicker:
				return
			}
		}
	}()
	for i := range intents {
		select {
		case work <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	close(stopTicker)
	close(stopKiller)
	if err := <-killerDone; err != nil {
		return Report{}, err
	}
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}

	r, applied, err := audit(ctx, addr, intents)
	if err != nil {
		return Report{}, err
	}
	tl.finish(applied)
	r.Mode, r.Attempts, r.Kills, r.Faults, r.Timeline, r.History = m, attempts.Load(), killed, px.faults(), tl, hist
	r.Seconds = time.Since(start).Seconds()
	fmt.Fprintf(c.Progress, "  [%s] done: %d intents, %d attempts, %d applied, %d duplicated, %d lost (%d intents gave up)\n",
		m, r.Intents, r.Attempts, r.Applied, r.Duplicated, r.Lost, failed.Load())
	return r, nil
}

// countingTransport counts attempts and, for the two broken modes, does
// what a broken interceptor does with the key.
type countingTransport struct {
	next  http.RoundTripper
	count *atomic.Int64
	mode  Mode
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.count.Add(1)
	switch t.mode {
	case ModeNoKey:
		r = r.Clone(r.Context())
		r.Header.Del("Idempotency-Key")
	case ModeKeyPerAttempt:
		// The incident: a fresh key for every attempt.
		r = r.Clone(r.Context())
		var b [16]byte
		_, _ = crand.Read(b[:])
		r.Header.Set("Idempotency-Key", hex.EncodeToString(b[:]))
	}
	return t.next.RoundTrip(r)
}

// lockedWriter serialises the progress lines of the demo's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

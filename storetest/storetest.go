// Package storetest is the conformance suite that every idem.Store runs.
//
// A store package calls Run from one of its tests with a Harness that says
// how to open the store and how to write and count a test effect through
// the store's transaction:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			NewLocation:  func(t *testing.T) string { return filepath.Join(t.TempDir(), "idem.db") },
//			Open:         openStore,
//			Close:        func(s idem.Store) error { return s.(*mystore.Store).Close() },
//			Persistent:   true,
//			Effect:       writeEffect,
//			CountEffects: countEffects,
//		})
//	}
//
// Each case is a subtest named after what it checks and cites the rule of
// the contract (K…, E… in the design brief) it enforces. The cases for
// persistent stores re-open the store and kill a child process with SIGKILL
// in the middle of the work; the child is the test binary itself, started
// with -test.run naming the test that called Run, so Run must be called
// from a top-level test (not from inside t.Run).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Harness tells the suite how to drive one store implementation.
type Harness struct {
	// NewLocation returns a fresh, empty location for one test case (a
	// file path, a schema name) and registers its own clean-up with t.
	// Required.
	NewLocation func(t *testing.T) string

	// Open opens the store at location, creating what it needs (including
	// the table that Effect writes to). Required.
	Open func(ctx context.Context, location string) (idem.Store, error)

	// Close closes a store returned by Open. Optional.
	Close func(s idem.Store) error

	// Persistent says that data survives Close and is reached again by
	// Open from this or another process. The re-open and crash cases run
	// only for persistent stores.
	Persistent bool

	// Effect writes one effect row called name through the transaction
	// that ctx carries (see idem.TxFrom). Required.
	Effect func(ctx context.Context, name string) error

	// CountEffects returns how many committed effect rows called name s
	// holds. Required.
	CountEffects func(ctx context.Context, s idem.Store, name string) (int, error)
}

func (h *Harness) validate() error {
	switch {
	case h.NewLocation == nil:
		return errors.New("storetest: Harness.NewLocation is required")
	case h.Open == nil:
		return errors.New("storetest: Harness.Open is required")
	case h.Effect == nil:
		return errors.New("storetest: Harness.Effect is required")
	case h.CountEffects == nil:
		return errors.New("storetest: Harness.CountEffects is required")
	}
	return nil
}

// Run runs the conformance suite against the store h describes.
func Run(t *testing.T, h Harness) {
	if err := h.validate(); err != nil {
		t.Fatal(err)
	}
	if loc := os.Getenv(crashChildEnv); loc != "" {
		runCrashChild(h, loc) // never returns
	}
	for _, c := range cases {
		if c.persistent && !h.Persistent {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			if !c.serial {
				t.Parallel()
			}
			c.run(t, &h)
		})
	}
}

type testCase struct {
	name       string
	persistent bool // runs only for persistent stores
	serial     bool // starts processes or holds many connections
	run        func(t *testing.T, h *Harness)
}

// cases is filled by the files that define them, one concept a file.
var cases []testCase

func register(c testCase) bool {
	cases = append(cases, c)
	return true
}

// clock is an injected clock for idem.Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is one test case's store, guard and clock.
type env struct {
	h        *Harness
	location string
	store    idem.Store
	guard    *idem.Guard
	clock    *clock
}

const testTTL = time.Hour

func setup(t *testing.T, h *Harness) *env {
	t.Helper()
	e := &env{h: h, location: h.NewLocation(t), clock: newClock()}
	e.open(t)
	return e
}

func (e *env) open(t *testing.T) {
	t.Helper()
	s, err := e.h.Open(context.Background(), e.location)
	if err != nil {
		t.Fatalf("Open(%q): %v", e.location, err)
	}
	g, err := idem.New(s, &idem.Config{TTL: testTTL, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.store, e.guard = s, g
	if e.h.Close != nil {
		t.Cleanup(func() { _ = e.h.Close(s) })
	}
}

func (e *env) close(t *testing.T) {
	t.Helper()
	if e.h.Close == nil {
		return
	}
	if err := e.h.Close(e.store); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func (e *env) effects(t *testing.T, name string) int {
	t.Helper()
	n, err := e.h.CountEffects(context.Background(), e.store, name)
	if err != nil {
		t.Fatalf("CountEffects(%q): %v", name, err)
	}
	return n
}

// work returns a Work that writes the effect name and returns res, and a
// counter of its runs.
func (e *env) work(name string, res idem.Result) (idem.Work, *counter) {
	c := &counter{}
	return func(ctx context.Context) (idem.Result, error) {
		c.add()
		if err := e.h.Effect(ctx, name); err != nil {
			return idem.Result{}, fmt.Errorf("effect: %w", err)
		}
		return res, nil
	}, c
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func req(scope, key, fp string) idem.Request {
	return idem.Request{Scope: scope, Key: key, Fingerprint: fp}
}

package inboxtest

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/idemkit/idem"
)

// Harness tells the suite how to drive one store.
type Harness struct {
	// NewLocation returns a fresh, empty location for one test case (a
	// file path, a connection string) and registers its own clean-up
	// with t. Required.
	NewLocation func(t testing.TB) string

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
		return errors.New("inboxtest: Harness.NewLocation is required")
	case h.Open == nil:
		return errors.New("inboxtest: Harness.Open is required")
	case h.Effect == nil:
		return errors.New("inboxtest: Harness.Effect is required")
	case h.CountEffects == nil:
		return errors.New("inboxtest: Harness.CountEffects is required")
	}
	return nil
}

// Run runs the suite against the store h describes, each case as a
// subtest of t named after it. A failing case ends with the rule the inbox
// broke, in words. Call Run from a top-level test (see the package
// documentation).
func Run(t *testing.T, h Harness) {
	t.Helper()
	if err := h.validate(); err != nil {
		t.Fatal(err)
	}
	if mode := os.Getenv(crashModeEnv); mode != "" {
		runCrashChild(h, crashMode(mode), os.Getenv(crashLocationEnv)) // never returns
	}
	for _, c := range suite {
		if c.persistent && !h.Persistent {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			if !c.serial {
				t.Parallel()
			}
			c.check(t, &h)
		})
	}
}

package leasetest

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
)

// Harness tells the suite how to drive one leased store.
type Harness struct {
	// NewLocation returns a fresh, empty location for one test case (a
	// file path, a database URL) and registers its own clean-up with t.
	// Stores opened on one location share their records. Required.
	NewLocation func(t testing.TB) string
	// Open opens the store at location, creating what it needs (including
	// the table Effect writes to). Required.
	Open func(ctx context.Context, location string) (idem.LeasedStore, error)
	// Close closes a store returned by Open. Optional.
	Close func(s idem.LeasedStore) error
	// Persistent says that data survives Close and is reached again by
	// Open from this or another process.
	Persistent bool
	// Effect writes one effect row called name through the local step's
	// transaction that ctx carries (see idem.TxFrom). Leave it nil for a
	// store that is not an idem.LeasedTxStore: the local-step cases are
	// then skipped.
	Effect func(ctx context.Context, name string) error
	// CountEffects returns how many committed effect rows called name s
	// holds. Required with Effect.
	CountEffects func(ctx context.Context, s idem.LeasedStore, name string) (int, error)
}

// Validate reports the first required field of h that is missing.
func (h *Harness) Validate() error {
	switch {
	case h.NewLocation == nil:
		return errors.New("leasetest: Harness.NewLocation is required")
	case h.Open == nil:
		return errors.New("leasetest: Harness.Open is required")
	case h.Effect != nil && h.CountEffects == nil:
		return errors.New("leasetest: Harness.CountEffects is required with Effect")
	}
	return nil
}

// Run runs the suite against the store h describes, each case as a subtest
// of t named after it. A failing case ends with the rule of the contract
// the store broke, in words. Call Run from a top-level test: the crash
// case of persistent stores re-runs that test in a child process.
func Run(t *testing.T, h Harness) {
	t.Helper()
	suite.Run(t, &h)
}

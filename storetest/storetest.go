package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
)

// Harness tells the suite how to drive one store implementation. The
// fields up to CountEffects say how to open the store and how to write and
// count a test effect; the hooks after them let the suite break the
// transaction in ways only the store's own driver can, and each is
// optional: the cases that need a missing hook are skipped.
type Harness struct {
	// NewLocation returns a fresh, empty location for one test case (a
	// file path, a schema name) and registers its own clean-up with t.
	// Required.
	NewLocation func(t testing.TB) string

	// Open opens the store at location, creating what it needs (including
	// the tables that Effect and FailCommit write to). Required.
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

	// PlantRecord writes rec into s's records, replacing any record of its
	// key, the way a writer that bypassed the key's lock would, while ctx
	// carries (see idem.TxFrom) an open Tx that holds that lock. A store
	// that lets other connections write meanwhile commits rec from one of
	// them and returns throughTx false. A store whose open transaction
	// excludes every other writer (SQLite) writes rec through the Tx's own
	// handle instead, as if it had been committed just before the
	// transaction began, and returns throughTx true: rec then goes when
	// the Tx rolls back. Optional.
	PlantRecord func(ctx context.Context, s idem.Store, rec *idem.Record) (throughTx bool, err error)

	// EndTx ends the transaction that ctx carries behind the store's back,
	// through its handle, the way a careless work could (see TxEnd).
	// Optional: leave it nil when a work cannot end its transaction.
	EndTx func(ctx context.Context, end TxEnd) error

	// FailCommit writes, through the transaction that ctx carries, a
	// change that makes the transaction fail when it commits although
	// every statement before succeeded: a row that breaks a deferred
	// constraint. Optional.
	FailCommit func(ctx context.Context) error
}

// TxEnd is how a work ends its transaction behind the store's back. Each
// value is also the SQL that does it, for harnesses of SQL stores to Exec
// through the handle.
type TxEnd string

// The ways a work can end its transaction itself.
const (
	EndRollback      TxEnd = "ROLLBACK"
	EndCommit        TxEnd = "COMMIT"
	EndRollbackBegin TxEnd = "ROLLBACK; BEGIN" // then a new transaction on the same connection
	EndCommitBegin   TxEnd = "COMMIT; BEGIN"
)

// txEnds lists every TxEnd, in the order the suite tries them.
var txEnds = []TxEnd{EndRollback, EndCommit, EndRollbackBegin, EndCommitBegin}

// Validate reports the first required field of h that is missing. Run
// calls it, and so do other suites that take a Harness (inbox/inboxtest).
func (h *Harness) Validate() error {
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

// Run runs the conformance suite against the store h describes, each case
// as a subtest of t named after it. A failing case ends with the rule of
// the contract the store broke, in words. Call Run from a top-level test
// (see the package documentation).
func Run(t *testing.T, h Harness) {
	t.Helper()
	suite.Run(t, &h)
}

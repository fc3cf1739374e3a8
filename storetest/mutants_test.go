package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// TestSuiteCatchesBrokenStores runs the suite against copies of the
// reference store broken one way each, and checks that the case meant
// for each defect fails.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mutation mutation
		caughtBy []string
	}{
		{recordAfterEffect, []string{"RecordCommitsInTheEffectsTransaction", "CommitMeetingALiveRecordConflicts"}},
		{recordBeforeEffect, []string{"RecordCommitsInTheEffectsTransaction"}},
		{upsertOverwritesLive, []string{"CommitMeetingALiveRecordConflicts", "CommitNeverReplacesARecordLiveAtItsNow"}},
		{deleteByKeyThenInsert, []string{"CommitNeverDeletesALiveRecordThatReplacedAnExpiredOne"}},
		{noTxCheck, []string{"WorkThatEndsItsTransactionRecordsNothing"}},
		{refusedGetsExpired, []string{"RefusedCallerNeverGetsAnExpiredRecord"}},
		{lockNeverRefuses, []string{"BeginLocksTheKeyUntilTheTxEnds", "ConcurrentDuplicatesRunOnceAndAreRefusedAtOnce"}},
		{readBeforeLock, []string{"WorkRunsOnceWhileRetriesRace"}},
		{unlockBeforeCommit, []string{"WorkRunsOnceWhileRetriesRace"}},
		{rollbackAfterEndFails, []string{"RollbackAfterTheEndIsANoOp"}},
		{lookupMissingIsNil, []string{"LookupOfAMissingRecordIsNotFound"}},
		{expiredNeverReplaced, []string{"CommitReplacesAnExpiredRecord", "ExpiredRecordBehavesAsNew"}},
		{expiryJudgedAtBegin, []string{"CommitNeverReplacesARecordLiveAtItsNow"}},
		{failureIsConflict, []string{"RecordCommitsInTheEffectsTransaction"}},
		{sweepIgnoresLimit, []string{"SweepDeletesOnlyExpiredRecords"}},
		{sweepDeletesLive, []string{"SweepDeletesOnlyExpiredRecords"}},
	} {
		t.Run(string(tt.mutation), func(t *testing.T) {
			t.Parallel()
			out := suite.Record(t, new(refHarness(tt.mutation)), nil)
			suite.Caught(t, out, string(tt.mutation), tt.caughtBy)
		})
	}
}

// TestSuitePassesIntactStores runs the suite against the intact reference
// store, with every hook, and against memstore through its exported API.
func TestSuitePassesIntactStores(t *testing.T) {
	t.Parallel()
	t.Run("Reference", func(t *testing.T) {
		t.Parallel()
		out := suite.Record(t, new(refHarness(intact)), nil)
		for name, o := range out {
			if o.Failed || o.Skipped {
				t.Errorf("%s: failed=%v skipped=%v\n%s", name, o.Failed, o.Skipped, o.Log)
			}
		}
	})
	t.Run("Memstore", func(t *testing.T) {
		t.Parallel()
		out := suite.Record(t, new(memHarness()), nil)
		for name, o := range out {
			if o.Failed {
				t.Errorf("%s failed:\n%s", name, o.Log)
			}
		}
	})
}

// TestSuiteIsWellFormed checks that every case has its own name, a run,
// and a rule that cites docs/DESIGN.md or the idem contract.
func TestSuiteIsWellFormed(t *testing.T) {
	t.Parallel()
	suite.WellFormed(t, "docs/DESIGN.md", "the contract of idem.")
}

// memHarness drives memstore through its exported API alone: the cases
// that need a hook are skipped (memstore's own test provides them).
func memHarness() Harness {
	return Harness{
		NewLocation: func(testing.TB) string { return "" },
		Open: func(context.Context, string) (idem.Store, error) {
			return memstore.New(), nil
		},
		Effect: func(ctx context.Context, name string) error {
			tx, ok := memstore.TxFrom(ctx)
			if !ok {
				return errors.New("no memstore transaction in the context")
			}
			n, _ := tx.Get(name)
			tx.Set(name, n+"x")
			return nil
		},
		CountEffects: func(_ context.Context, s idem.Store, name string) (int, error) {
			v, _ := s.(*memstore.Store).Value(name)
			return len(v), nil
		},
	}
}

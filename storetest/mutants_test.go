package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem/internal/tbrecord"

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
			out := runSuite(t, refHarness(tt.mutation))
			tbrecord.Caught(t, out, string(tt.mutation), tt.caughtBy, "the store breaks the rule: ", ruleOf)
		})
	}
}

// TestSuitePassesIntactStores runs the suite against the intact reference
// store, with every hook, and against memstore through its exported API.
func TestSuitePassesIntactStores(t *testing.T) {
	t.Parallel()
	t.Run("Reference", func(t *testing.T) {
		t.Parallel()
		out := runSuite(t, refHarness(intact))
		for name, o := range out {
			if o.Failed || o.Skipped {
				t.Errorf("%s: failed=%v skipped=%v\n%s", name, o.Failed, o.Skipped, o.Log)
			}
		}
	})
	t.Run("Memstore", func(t *testing.T) {
		t.Parallel()
		out := runSuite(t, memHarness())
		for name, o := range out {
			if o.Failed {
				t.Errorf("%s failed:\n%s", name, o.Log)
			}
		}
	})
}

func TestSuiteIsWellFormed(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range suite {
		switch {
		case c.name == "" || seen[c.name]:
			t.Errorf("case %q: the name is empty or not unique", c.name)
		case c.run == nil:
			t.Errorf("case %s has no run", c.name)
		case !strings.Contains(c.rule, "docs/DESIGN.md") && !strings.Contains(c.rule, "the contract of idem."):
			t.Errorf("case %s: the rule %q cites neither docs/DESIGN.md nor the idem contract", c.name, c.rule)
		}
		seen[c.name] = true
	}
}

func ruleOf(name string) string {
	for _, c := range suite {
		if c.name == name {
			return c.rule
		}
	}
	return "no case " + name
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

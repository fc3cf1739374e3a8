package windowtest

import (
	"testing"
	"time"

	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/internal/tbrecord"
	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/window"
)

// TestSuiteCatchesBrokenWindows runs the suite against copies of the
// reference window broken one way each, and checks that the cases meant
// for each defect fail, stating their rule.
func TestSuiteCatchesBrokenWindows(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mutation mutation
		caughtBy []string
	}{
		{releaseAnyToken, []string{"OnlyTheOwnerReleases", "ExpiredOwnerCannotTouchTheNewHolder"}},
		{confirmAnyToken, []string{"OnlyTheOwnerConfirms"}},
		{releaseConfirmed, []string{"ConfirmedIDIsNeverReleased"}},
		{leaseNeverExpires, []string{"LeaseExpires", "ExpiredOwnerCannotTouchTheNewHolder", "ExpiryBoundaries"}},
		{confirmKeepsLease, []string{"ConfirmExtendsToTheWindow", "ExpiryBoundaries"}},
		{windowNeverExpires, []string{"WindowExpires", "ExpiryBoundaries"}},
		{checkThenSet, []string{"ConcurrentReserversOneWins", "ConcurrentDeliveriesApplyOnce"}},
		{doneIsFree, []string{"ConfirmedIDIsDone", "FailedHandlerIsProcessedOnRedelivery", "ConcurrentDeliveriesApplyOnce"}},
		{heldIsDone, []string{"HeldIDIsInProgress", "ConcurrentReserversOneWins"}},
		{lateConfirmDropped, []string{"LateConfirmRecordsAnUnclaimedID"}},
		{lateConfirmOverwrites, []string{"ExpiredOwnerCannotTouchTheNewHolder"}},
		{sameToken, []string{"TokensAreUnique", "OnlyTheOwnerConfirms", "ReleaseFreesTheIDAtOnce"}},
		{reconfirmFails, []string{"ConfirmAgainByTheOwnerChangesNothing"}},
		{batchChecksFirst, []string{"BatchReserveAnswersEachIDInOrder"}},
		{batchKeepsPartial, []string{"BatchWithAnEmptyIDDoesNothing"}},
		{emptyIDAccepted, []string{"EmptyIDIsRefused"}},
		{doSkipsRelease, []string{"FailedHandlerIsProcessedOnRedelivery", "PanickingHandlerReleasesTheID", "ReleaseFreesTheIDAtOnce"}},
	} {
		t.Run(string(tt.mutation), func(t *testing.T) {
			t.Parallel()
			out := suite.Record(t, new(refHarness(tt.mutation)), parallel)
			suite.Caught(t, out, string(tt.mutation), tt.caughtBy)
		})
	}
}

// TestSuitePassesIntactWindows runs the suite against the intact
// reference window, through the package's batch fallbacks too, and
// against window.Memory.
func TestSuitePassesIntactWindows(t *testing.T) {
	t.Parallel()
	harnesses := map[string]Harness{
		"Reference": refHarness(intact),
		"Memory": {
			New: func(t testing.TB, lease, win time.Duration) (window.Window, func(time.Duration)) {
				c := testclock.New()
				w, err := window.NewMemory(&window.MemoryConfig{Lease: lease, Window: win, Now: c.Now})
				if err != nil {
					t.Fatal(err)
				}
				return w, c.Advance
			},
			Exact: true,
		},
	}
	for name, h := range harnesses {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := suite.Record(t, &h, parallel)
			if len(out) != len(suite.Cases) {
				t.Errorf("%d cases ran, want %d", len(out), len(suite.Cases))
			}
			for _, c := range tbrecord.FailedCases(out) {
				t.Errorf("case %s failed on an intact window:\n%s", c, out[c].Log)
			}
			for c, o := range out {
				if o.Skipped {
					t.Errorf("case %s skipped on an intact window:\n%s", c, o.Log)
				}
			}
		})
	}
}

// TestRunOnRealTime runs the suite on real time (not Exact), with the
// reference window on the real clock, so that the suite's sleeping path,
// which the Redis window takes, is checked here too.
func TestRunOnRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps for seconds")
	}
	Run(t, Harness{
		New: func(t testing.TB, lease, win time.Duration) (window.Window, func(time.Duration)) {
			return newRef(lease, win, time.Now, intact), time.Sleep
		},
		Lease: 200 * time.Millisecond,
	})
}

// TestSuiteIsWellFormed checks that every case has its own name, a run
// and a rule.
func TestSuiteIsWellFormed(t *testing.T) {
	t.Parallel()
	suite.WellFormed(t)
}

func TestRun(t *testing.T) {
	Run(t, refHarness(intact))
}

// parallel runs the recorded cases at once, as Run does.
var parallel = &conformance.RecordConfig{Parallel: true}

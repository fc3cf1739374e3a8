package windowtest

import "testing"

// testCase is one case of the suite: a rule of the contract, and the run
// that checks a window keeps it.
type testCase struct {
	name string
	// rule is what the case checks, in words. A failing case ends with
	// it.
	rule      string
	exactOnly bool // needs an exact, injected clock
	run       func(t testing.TB, h *Harness)
}

// check runs the case and, when it fails, states the rule the window broke.
func (c *testCase) check(t testing.TB, h *Harness) {
	defer func() {
		if t.Failed() {
			t.Errorf("the window breaks the rule: %s", c.rule)
		}
	}()
	c.run(t, h)
}

// suite is every case, in the order Run starts them.
var suite = []testCase{
	// Reservation, confirmation, release.
	{
		name: "NewIDIsReserved",
		rule: "Reserve of an id never seen answers Reserved, for that id, with a non-zero token",
		run:  newIDIsReserved,
	},
	{
		name: "HeldIDIsInProgress",
		rule: "while its lease is live, Reserve of a reserved id answers InProgress with no token, however often it is asked",
		run:  heldIDIsInProgress,
	},
	{
		name: "ConfirmedIDIsDone",
		rule: "after its owner's Confirm, Reserve of the id answers Done with no token, however often it is asked",
		run:  confirmedIDIsDone,
	},
	{
		name: "ConfirmAgainByTheOwnerChangesNothing",
		rule: "a second Confirm with the token that confirmed the id succeeds, and the id stays Done",
		run:  confirmAgainByTheOwnerChangesNothing,
	},
	{
		name: "ReleaseFreesTheIDAtOnce",
		rule: "after its owner's Release, the id is reserved again at once, under a new token, and the released token holds nothing",
		run:  releaseFreesTheIDAtOnce,
	},
	{
		name: "FailedHandlerIsProcessedOnRedelivery",
		rule: "through window.Do, a handler that fails has its id released, so the redelivery runs it again (it is not dropped); once it succeeds, later deliveries are duplicates that run nothing",
		run:  failedHandlerIsProcessedOnRedelivery,
	},
	{
		name: "PanickingHandlerReleasesTheID",
		rule: "through window.Do, a handler that panics has its id released and the panic goes on, so the redelivery runs it again",
		run:  panickingHandlerReleasesTheID,
	},
	{
		name: "OnlyTheOwnerConfirms",
		rule: "Confirm of a live reservation with any token but its own (zero, another id's, a released one) fails with ErrNotHeld and changes nothing: the id stays in progress and its owner can still confirm it",
		run:  onlyTheOwnerConfirms,
	},
	{
		name: "OnlyTheOwnerReleases",
		rule: "Release of a live reservation with any token but its own fails with ErrNotHeld and changes nothing: the id stays in progress",
		run:  onlyTheOwnerReleases,
	},
	{
		name: "ConfirmedIDIsNeverReleased",
		rule: "Release of a confirmed id fails with ErrNotHeld, even with the token that confirmed it, and the id stays Done",
		run:  confirmedIDIsNeverReleased,
	},
	{
		name: "EmptyIDIsRefused",
		rule: "Reserve, Confirm and Release of an empty id fail with ErrNoID",
		run:  emptyIDIsRefused,
	},
	{
		name: "IDsAreComparedExactly",
		rule: "ids that differ in any byte are independent: case, spaces, separators, non-ASCII bytes, long ids that differ only in their last byte",
		run:  idsAreComparedExactly,
	},
	{
		name: "TokensAreUnique",
		rule: "every Reserved answer carries a token no other reservation of the window got, also for an id reserved again after a release",
		run:  tokensAreUnique,
	},

	// Expiry.
	{
		name: "LeaseExpires",
		rule: "a lease that is neither confirmed nor released lasts Lease from its Reserve, and the id can then be reserved by another, under a new token",
		run:  leaseExpires,
	},
	{
		name: "ExpiredOwnerCannotTouchTheNewHolder",
		rule: "once a lease expired and another reserved the id, the first owner's Confirm and Release fail with ErrNotHeld and leave the new lease live; the new holder confirms it",
		run:  expiredOwnerCannotTouchTheNewHolder,
	},
	{
		name: "LateConfirmRecordsAnUnclaimedID",
		rule: "a Confirm after its lease expired, while nobody else holds the id, records the id as done: the handler succeeded, so a redelivery is a duplicate",
		run:  lateConfirmRecordsAnUnclaimedID,
	},
	{
		name: "ConfirmExtendsToTheWindow",
		rule: "a confirmed id stays Done past the end of its lease, for Window after its Confirm",
		run:  confirmExtendsToTheWindow,
	},
	{
		name: "WindowExpires",
		rule: "Window after its Confirm, an id is forgotten: Reserve answers Reserved again",
		run:  windowExpires,
	},
	{
		name:      "ExpiryBoundaries",
		rule:      "a lease is live until Lease after its Reserve and expired at exactly Lease; a confirmed id is Done until Window after its Confirm and forgotten at exactly Window",
		exactOnly: true,
		run:       expiryBoundaries,
	},

	// Concurrency.
	{
		name: "ConcurrentReserversOneWins",
		rule: "of many goroutines reserving one id at once, exactly one gets Reserved and the others InProgress; after the winner confirms, every one gets Done",
		run:  concurrentReserversOneWins,
	},
	{
		name: "ConcurrentDeliveriesApplyOnce",
		rule: "many goroutines delivering the same ids through window.Do, with handlers that fail now and then, apply each id exactly once, never run two handlers of one id at a time, and settle every delivery",
		run:  concurrentDeliveriesApplyOnce,
	},

	// Batches (for a window.Batcher).
	{
		name: "BatchReserveAnswersEachIDInOrder",
		rule: "ReserveBatch answers each id as Reserve would, in order: a new id Reserved, a held one InProgress, a confirmed one Done, and an id repeated in the batch Reserved at its first place and InProgress at the next",
		run:  batchReserveAnswersEachIDInOrder,
	},
	{
		name: "BatchConfirmAndReleaseOnlyTheirOwn",
		rule: "ConfirmBatch and ReleaseBatch act on the items their tokens hold, and report the others, by index, in a *BatchError that matches ErrNotHeld",
		run:  batchConfirmAndReleaseOnlyTheirOwn,
	},
	{
		name: "BatchWithAnEmptyIDDoesNothing",
		rule: "a batch with an empty id among others fails with ErrNoID and does nothing: ReserveBatch leaves every id free, ConfirmBatch and ReleaseBatch leave every id held",
		run:  batchWithAnEmptyIDDoesNothing,
	},
}

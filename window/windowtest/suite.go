package windowtest

import "github.com/idemkit/idem/internal/conformance"

// suite is every case, in the order Run starts them.
var suite = conformance.Suite[*Harness]{
	Subject:  "window",
	Validate: (*Harness).validate,
	Cases: []conformance.Case[*Harness]{
		// Reservation, confirmation, release.
		{
			Name: "NewIDIsReserved",
			Rule: "Reserve of an id never seen answers Reserved, for that id, with a non-zero token",
			Run:  newIDIsReserved,
		},
		{
			Name: "HeldIDIsInProgress",
			Rule: "while its lease is live, Reserve of a reserved id answers InProgress with no token, however often it is asked",
			Run:  heldIDIsInProgress,
		},
		{
			Name: "ConfirmedIDIsDone",
			Rule: "after its owner's Confirm, Reserve of the id answers Done with no token, however often it is asked",
			Run:  confirmedIDIsDone,
		},
		{
			Name: "ConfirmAgainByTheOwnerChangesNothing",
			Rule: "a second Confirm with the token that confirmed the id succeeds, and the id stays Done",
			Run:  confirmAgainByTheOwnerChangesNothing,
		},
		{
			Name: "ReleaseFreesTheIDAtOnce",
			Rule: "after its owner's Release, the id is reserved again at once, under a new token, and the released token holds nothing",
			Run:  releaseFreesTheIDAtOnce,
		},
		{
			Name: "FailedHandlerIsProcessedOnRedelivery",
			Rule: "through window.Do, a handler that fails has its id released, so the redelivery runs it again (it is not dropped); once it succeeds, later deliveries are duplicates that run nothing",
			Run:  failedHandlerIsProcessedOnRedelivery,
		},
		{
			Name: "PanickingHandlerReleasesTheID",
			Rule: "through window.Do, a handler that panics has its id released and the panic goes on, so the redelivery runs it again",
			Run:  panickingHandlerReleasesTheID,
		},
		{
			Name: "OnlyTheOwnerConfirms",
			Rule: "Confirm of a live reservation with any token but its own (zero, another id's, a released one) fails with ErrNotHeld and changes nothing: the id stays in progress and its owner can still confirm it",
			Run:  onlyTheOwnerConfirms,
		},
		{
			Name: "OnlyTheOwnerReleases",
			Rule: "Release of a live reservation with any token but its own fails with ErrNotHeld and changes nothing: the id stays in progress",
			Run:  onlyTheOwnerReleases,
		},
		{
			Name: "ConfirmedIDIsNeverReleased",
			Rule: "Release of a confirmed id fails with ErrNotHeld, even with the token that confirmed it, and the id stays Done",
			Run:  confirmedIDIsNeverReleased,
		},
		{
			Name: "EmptyIDIsRefused",
			Rule: "Reserve, Confirm and Release of an empty id fail with ErrNoID",
			Run:  emptyIDIsRefused,
		},
		{
			Name: "IDsAreComparedExactly",
			Rule: "ids that differ in any byte are independent: case, spaces, separators, non-ASCII bytes, long ids that differ only in their last byte",
			Run:  idsAreComparedExactly,
		},
		{
			Name: "TokensAreUnique",
			Rule: "every Reserved answer carries a token no other reservation of the window got, also for an id reserved again after a release",
			Run:  tokensAreUnique,
		},

		// Expiry.
		{
			Name: "LeaseExpires",
			Rule: "a lease that is neither confirmed nor released lasts Lease from its Reserve, and the id can then be reserved by another, under a new token",
			Run:  leaseExpires,
		},
		{
			Name: "ExpiredOwnerCannotTouchTheNewHolder",
			Rule: "once a lease expired and another reserved the id, the first owner's Confirm and Release fail with ErrNotHeld and leave the new lease live; the new holder confirms it",
			Run:  expiredOwnerCannotTouchTheNewHolder,
		},
		{
			Name: "LateConfirmRecordsAnUnclaimedID",
			Rule: "a Confirm after its lease expired, while nobody else holds the id, records the id as done: the handler succeeded, so a redelivery is a duplicate",
			Run:  lateConfirmRecordsAnUnclaimedID,
		},
		{
			Name: "ConfirmExtendsToTheWindow",
			Rule: "a confirmed id stays Done past the end of its lease, for Window after its Confirm",
			Run:  confirmExtendsToTheWindow,
		},
		{
			Name: "WindowExpires",
			Rule: "Window after its Confirm, an id is forgotten: Reserve answers Reserved again",
			Run:  windowExpires,
		},
		{
			Name:  "ExpiryBoundaries",
			Rule:  "a lease is live until Lease after its Reserve and expired at exactly Lease; a confirmed id is Done until Window after its Confirm and forgotten at exactly Window",
			Needs: exact,
			Run:   expiryBoundaries,
		},

		// Concurrency.
		{
			Name: "ConcurrentReserversOneWins",
			Rule: "of many goroutines reserving one id at once, exactly one gets Reserved and the others InProgress; after the winner confirms, every one gets Done",
			Run:  concurrentReserversOneWins,
		},
		{
			Name: "ConcurrentDeliveriesApplyOnce",
			Rule: "many goroutines delivering the same ids through window.Do, with handlers that fail now and then, apply each id exactly once, never run two handlers of one id at a time, and settle every delivery",
			Run:  concurrentDeliveriesApplyOnce,
		},

		// Batches (for a window.Batcher).
		{
			Name: "BatchReserveAnswersEachIDInOrder",
			Rule: "ReserveBatch answers each id as Reserve would, in order: a new id Reserved, a held one InProgress, a confirmed one Done, and an id repeated in the batch Reserved at its first place and InProgress at the next",
			Run:  batchReserveAnswersEachIDInOrder,
		},
		{
			Name: "BatchConfirmAndReleaseOnlyTheirOwn",
			Rule: "ConfirmBatch and ReleaseBatch act on the items their tokens hold, and report the others, by index, in a *BatchError that matches ErrNotHeld",
			Run:  batchConfirmAndReleaseOnlyTheirOwn,
		},
		{
			Name: "BatchWithAnEmptyIDDoesNothing",
			Rule: "a batch with an empty id among others fails with ErrNoID and does nothing: ReserveBatch leaves every id free, ConfirmBatch and ReleaseBatch leave every id held",
			Run:  batchWithAnEmptyIDDoesNothing,
		},
	},
}

// exact says that h's windows run on an exact, injected clock, as the
// cases that check boundaries to the nanosecond need.
func exact(h *Harness) bool { return h.Exact }

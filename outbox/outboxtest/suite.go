package outboxtest

import "github.com/idemkit/idem/internal/conformance"

// suite is every case, in the order Run runs them. The rules are those of
// docs/OUTBOX.md.
var suite = conformance.Suite[*Harness]{
	Subject:  "outbox",
	Validate: (*Harness).Validate,
	Cases: []conformance.Case[*Harness]{
		{
			Name: "CommittedMessageIsPublishedOnceWithItsID",
			Rule: "a message staged in the work's transaction is published once it commits, with the id ID(scope, key, name) and its subject, body, headers and partition key intact (docs/OUTBOX.md, Guarantee)",
			Run:  committedMessageIsPublishedOnceWithItsID,
		},
		{
			Name: "RolledBackMessageIsNeverPublished",
			Rule: "a message staged by a work that returned an error, or that panicked, is rolled back with the effect and never published (docs/OUTBOX.md, Guarantee)",
			Run:  rolledBackMessageIsNeverPublished,
		},
		{
			Name: "UncommittedMessageIsNotPublished",
			Rule: "a relay running while the staging transaction is still open publishes nothing of it; the message is published once it commits (docs/OUTBOX.md, Guarantee)",
			Run:  uncommittedMessageIsNotPublished,
		},
		{
			Name: "ReExecutionStagesTheSameIDOnce",
			Rule: "a replay stages nothing, and a re-execution of an intent (its record expired) stages the same id, which is a no-op: one message in all (docs/OUTBOX.md, Ids)",
			Run:  reExecutionStagesTheSameIDOnce,
		},
		{
			Name: "StageOutsideATransactionFails",
			Rule: "Stage outside a transaction that records a key returns ErrNoTx and writes nothing (docs/OUTBOX.md, Staging)",
			Run:  stageOutsideATransactionFails,
		},
		{
			Name: "MarkedSentOnlyAfterConfirm",
			Rule: "a publish that fails leaves the message pending, and the next claim publishes it again with the same id until the broker confirms it (docs/OUTBOX.md, Guarantee)",
			Run:  markedSentOnlyAfterConfirm,
		},
		{
			Name: "RelayDyingMidClaimLosesNothing",
			Rule: "a claim that never finishes (its relay died, after the broker confirmed or before) gives its messages back: the next relay publishes each with the same id (docs/OUTBOX.md, Guarantee)",
			Run:  relayDyingMidClaimLosesNothing,
		},
		{
			Name: "RefusedMessageIsParkedNeverDropped",
			Rule: "a message refused MaxAttempts times is parked: counted in Backlog.Parked, listed by Parked with its last error, not published again until Unpark, and the other messages go on (docs/OUTBOX.md, Parking)",
			Run:  refusedMessageIsParkedNeverDropped,
		},
		{
			Name: "PartitionOrderHoldsThroughFailures",
			Rule: "with one relay, the messages of a partition key are confirmed in the order they were staged, even when some publishes fail and are retried (docs/OUTBOX.md, Order)",
			Run:  partitionOrderHoldsThroughFailures,
		},
		{
			Name: "SweepDeletesOnlySentMessagesPastRetention",
			Rule: "a sweep deletes the messages sent more than Retention ago and never a pending or parked one (docs/OUTBOX.md, Retention)",
			Run:  sweepDeletesOnlySentMessagesPastRetention,
		},
		{
			Name: "LocalStepStagesWithItsStep",
			Rule: "in a leased Run.LocalStep, Stage writes through the step's transaction, with the lease's intent: a failed step stages nothing, a committed one its message (docs/OUTBOX.md, Staging)",
			Run:  localStepStagesWithItsStep,
		},
		{
			Name:   "ConcurrentRelaysNeverPublishAMessageTwiceAtOnce",
			Rule:   "several relays over one outbox publish every message, none by two relays at once, and each partition key in staging order (docs/OUTBOX.md, Several relays)",
			Needs:  func(h *Harness) bool { return h.OpenSource != nil },
			Serial: true,
			Run:    concurrentRelaysNeverPublishAMessageTwiceAtOnce,
		},
	},
}

package inboxtest

import "github.com/idemkit/idem/internal/conformance"

// suite is every case, in the order Run runs them. "Process" is the
// contract written on inbox.Process.
var suite = conformance.Suite[*Harness]{
	Subject:  "inbox",
	Validate: validate,
	ChildEnv: crashModeEnv,
	Child:    runCrashChild,
	Cases: []conformance.Case[*Harness]{
		// Deliveries and redeliveries.
		{
			Name: "FirstDeliveryApplies",
			Rule: "the first delivery of an id runs the handler once, and its effect commits with the id's record: Applied, to be acknowledged (docs/DESIGN.md Q1)",
			Run:  firstDeliveryApplies,
		},
		{
			Name: "DuplicateRunsNothingAndIsAcked",
			Rule: "a redelivery of an id that took effect runs nothing and commits nothing: Duplicate, to be acknowledged (docs/DESIGN.md Q1)",
			Run:  duplicateRunsNothingAndIsAcked,
		},
		{
			Name: "HandlerErrorRollsBackThenSucceeds",
			Rule: "a handler error rolls its effect back and records nothing, so the redelivery runs the handler again and applies once (docs/DESIGN.md Q2)",
			Run:  handlerErrorRollsBackThenSucceeds,
		},
		{
			Name: "PanicRollsBackAndIsRetried",
			Rule: "a handler that panics has its effect rolled back and nothing recorded; the panic becomes an error and the message is retried (Process)",
			Run:  panicRollsBackAndIsRetried,
		},
		{
			Name: "RefusalIsSettledAndCommitsNothing",
			Rule: "a refusal (inbox.Refuse) rolls back what the handler wrote and records the refusal with the id: Refused, settled, and a redelivery is a Duplicate that runs nothing (Process)",
			Run:  refusalIsSettledAndCommitsNothing,
		},
		{
			Name: "PersistentFailureIsDeadLetteredAtMaxAttempts",
			Rule: "a handler that keeps failing is retried until the delivery numbered Config.MaxAttempts (5 by default), which is dead-lettered with nothing recorded; an unknown attempt count (0) is never dead-lettered (Process)",
			Run:  persistentFailureIsDeadLetteredAtMaxAttempts,
		},
		{
			Name: "ReusedIDWithAnotherBodyIsDeadLettered",
			Rule: "an id that took effect, or was refused, with one body and comes again with another is dead-lettered with ErrConflict: neither run nor acknowledged as a duplicate (Process)",
			Run:  reusedIDWithAnotherBodyIsDeadLettered,
		},
		{
			Name: "MessageWithoutIDIsDeadLettered",
			Rule: "a message without an id is dead-lettered with ErrNoID and the handler does not run, since nothing could tell its redelivery from a new message (Process)",
			Run:  messageWithoutIDIsDeadLettered,
		},
		{
			Name: "AnyIDTakesEffectOnce",
			Rule: "every id (long, binary, with spaces, looking like another id's digest) takes effect once, and two different ids never share a record (inbox.Key)",
			Run:  anyIDTakesEffectOnce,
		},
		{
			Name: "ConsumersAreIndependent",
			Rule: "an id takes effect once per consumer name: two inboxes with different names on one store each apply it once (docs/DESIGN.md Q1)",
			Run:  consumersAreIndependent,
		},
		{
			Name: "CommitsWhenCallerGivesUpAfterHandler",
			Rule: "a handler that succeeded commits with its id even when the caller's context ends meanwhile, so that the redelivery is a Duplicate (Process)",
			Run:  commitsWhenCallerGivesUpAfterHandler,
		},
		{
			Name: "ObserverSeesEveryOutcome",
			Rule: "Config.Observer is told each message's consumer, id, outcome, attempt and error (inbox.Config)",
			Run:  observerSeesEveryOutcome,
		},

		// Expiry.
		{
			Name: "IDIsRememberedForSevenDaysByDefault",
			Rule: "an id is remembered for 7 days by default; from then on a delivery of it runs again (docs/DESIGN.md E7, inbox.Config.TTL)",
			Run:  idIsRememberedForSevenDaysByDefault,
		},
		{
			Name: "ConfiguredTTLSetsExpiry",
			Rule: "Config.TTL sets how long an id is remembered (docs/DESIGN.md E7)",
			Run:  configuredTTLSetsExpiry,
		},
		{
			Name: "SweeperDeletesExpiredInboxRecords",
			Rule: "idem.Sweeper deletes the inbox's expired records and keeps its live ones (docs/DESIGN.md E7)",
			Run:  sweeperDeletesExpiredInboxRecords,
		},

		// Concurrency, with real goroutines.
		{
			Name:   "DeliveryWhileAnotherHoldsTheIDIsRetried",
			Rule:   "a delivery of an id whose handler is running elsewhere gets Retry with idem.ErrInFlight at once and runs nothing, since the first may yet fail (Process, docs/DESIGN.md E3)",
			Serial: true,
			Run:    deliveryWhileAnotherHoldsTheIDIsRetried,
		},
		{
			Name:   "ManyDeliveriesOfOneIDApplyOnce",
			Rule:   "many goroutines delivering one id at once, each until its delivery is settled, apply it once: one Applied, every other delivery Duplicate (docs/DESIGN.md Q1, E2)",
			Serial: true,
			Run:    manyDeliveriesOfOneIDApplyOnce,
		},

		// Durability, for persistent stores.
		{
			Name:  "RecordSurvivesReopen",
			Rule:  "an applied id stays recorded after the store is closed and reopened: the redelivery is a Duplicate (docs/DESIGN.md Q1)",
			Needs: persistent,
			Run:   recordSurvivesReopen,
		},
		{
			Name:   "KilledAfterCommitBeforeAckIsDuplicate",
			Rule:   "a consumer killed with SIGKILL after the commit and before the ack leaves the effect and the id committed: the redelivery is a Duplicate and the effect happened once (docs/DESIGN.md Q1)",
			Needs:  persistent,
			Serial: true,
			Run:    killedAfterCommitBeforeAckIsDuplicate,
		},
		{
			Name:   "KilledInsideHandlerLeavesNothing",
			Rule:   "a consumer killed with SIGKILL inside the handler leaves neither effect nor id, the id does not stay in flight, and the redelivery applies once (docs/DESIGN.md Q2)",
			Needs:  persistent,
			Serial: true,
			Run:    killedInsideHandlerLeavesNothing,
		},
	},
}

// persistent says that h's store is persistent, as the re-open and crash
// cases need.
func persistent(h *Harness) bool { return h.Persistent }

package inboxtest

import "testing"

// testCase is one case of the suite: a rule, and the run that checks the
// inbox keeps it on the store.
type testCase struct {
	name string
	// rule is what the case checks, in words, with the ids of the rules
	// of docs/DESIGN.md it rests on. A failing case ends with it.
	rule       string
	persistent bool // runs only for persistent stores
	serial     bool // starts processes or many goroutines: not in parallel
	run        func(t testing.TB, h *Harness)
}

// check runs the case and, when it fails, states the rule the inbox broke.
func (c *testCase) check(t testing.TB, h *Harness) {
	defer func() {
		if t.Failed() {
			t.Errorf("the inbox breaks the rule: %s", c.rule)
		}
	}()
	c.run(t, h)
}

// suite is every case, in the order Run runs them. "Process" is the
// contract written on inbox.Process.
var suite = []testCase{
	// Deliveries and redeliveries.
	{
		name: "FirstDeliveryApplies",
		rule: "the first delivery of an id runs the handler once, and its effect commits with the id's record: Applied, to be acknowledged (docs/DESIGN.md Q1)",
		run:  firstDeliveryApplies,
	},
	{
		name: "DuplicateRunsNothingAndIsAcked",
		rule: "a redelivery of an id that took effect runs nothing and commits nothing: Duplicate, to be acknowledged (docs/DESIGN.md Q1)",
		run:  duplicateRunsNothingAndIsAcked,
	},
	{
		name: "HandlerErrorRollsBackThenSucceeds",
		rule: "a handler error rolls its effect back and records nothing, so the redelivery runs the handler again and applies once (docs/DESIGN.md Q2)",
		run:  handlerErrorRollsBackThenSucceeds,
	},
	{
		name: "PanicRollsBackAndIsRetried",
		rule: "a handler that panics has its effect rolled back and nothing recorded; the panic becomes an error and the message is retried (Process)",
		run:  panicRollsBackAndIsRetried,
	},
	{
		name: "RefusalIsSettledAndCommitsNothing",
		rule: "a refusal (inbox.Refuse) rolls back what the handler wrote and records the refusal with the id: Refused, settled, and a redelivery is a Duplicate that runs nothing (Process)",
		run:  refusalIsSettledAndCommitsNothing,
	},
	{
		name: "PersistentFailureIsDeadLetteredAtMaxAttempts",
		rule: "a handler that keeps failing is retried until the delivery numbered Config.MaxAttempts (5 by default), which is dead-lettered with nothing recorded; an unknown attempt count (0) is never dead-lettered (Process)",
		run:  persistentFailureIsDeadLetteredAtMaxAttempts,
	},
	{
		name: "ReusedIDWithAnotherBodyIsDeadLettered",
		rule: "an id that took effect, or was refused, with one body and comes again with another is dead-lettered with ErrConflict: neither run nor acknowledged as a duplicate (Process)",
		run:  reusedIDWithAnotherBodyIsDeadLettered,
	},
	{
		name: "MessageWithoutIDIsDeadLettered",
		rule: "a message without an id is dead-lettered with ErrNoID and the handler does not run, since nothing could tell its redelivery from a new message (Process)",
		run:  messageWithoutIDIsDeadLettered,
	},
	{
		name: "AnyIDTakesEffectOnce",
		rule: "every id (long, binary, with spaces, looking like another id's digest) takes effect once, and two different ids never share a record (inbox.Key)",
		run:  anyIDTakesEffectOnce,
	},
	{
		name: "ConsumersAreIndependent",
		rule: "an id takes effect once per consumer name: two inboxes with different names on one store each apply it once (docs/DESIGN.md Q1)",
		run:  consumersAreIndependent,
	},
	{
		name: "CommitsWhenCallerGivesUpAfterHandler",
		rule: "a handler that succeeded commits with its id even when the caller's context ends meanwhile, so that the redelivery is a Duplicate (Process)",
		run:  commitsWhenCallerGivesUpAfterHandler,
	},
	{
		name: "ObserverSeesEveryOutcome",
		rule: "Config.Observer is told each message's consumer, id, outcome, attempt and error (inbox.Config)",
		run:  observerSeesEveryOutcome,
	},

	// Expiry.
	{
		name: "IDIsRememberedForSevenDaysByDefault",
		rule: "an id is remembered for 7 days by default; from then on a delivery of it runs again (docs/DESIGN.md E7, inbox.Config.TTL)",
		run:  idIsRememberedForSevenDaysByDefault,
	},
	{
		name: "ConfiguredTTLSetsExpiry",
		rule: "Config.TTL sets how long an id is remembered (docs/DESIGN.md E7)",
		run:  configuredTTLSetsExpiry,
	},
	{
		name: "SweeperDeletesExpiredInboxRecords",
		rule: "idem.Sweeper deletes the inbox's expired records and keeps its live ones (docs/DESIGN.md E7)",
		run:  sweeperDeletesExpiredInboxRecords,
	},

	// Concurrency, with real goroutines.
	{
		name:   "DeliveryWhileAnotherHoldsTheIDIsRetried",
		rule:   "a delivery of an id whose handler is running elsewhere gets Retry with idem.ErrInFlight at once and runs nothing, since the first may yet fail (Process, docs/DESIGN.md E3)",
		serial: true,
		run:    deliveryWhileAnotherHoldsTheIDIsRetried,
	},
	{
		name:   "ManyDeliveriesOfOneIDApplyOnce",
		rule:   "many goroutines delivering one id at once, each until its delivery is settled, apply it once: one Applied, every other delivery Duplicate (docs/DESIGN.md Q1, E2)",
		serial: true,
		run:    manyDeliveriesOfOneIDApplyOnce,
	},

	// Durability, for persistent stores.
	{
		name:       "RecordSurvivesReopen",
		rule:       "an applied id stays recorded after the store is closed and reopened: the redelivery is a Duplicate (docs/DESIGN.md Q1)",
		persistent: true,
		run:        recordSurvivesReopen,
	},
	{
		name:       "KilledAfterCommitBeforeAckIsDuplicate",
		rule:       "a consumer killed with SIGKILL after the commit and before the ack leaves the effect and the id committed: the redelivery is a Duplicate and the effect happened once (docs/DESIGN.md Q1)",
		persistent: true,
		serial:     true,
		run:        killedAfterCommitBeforeAckIsDuplicate,
	},
	{
		name:       "KilledInsideHandlerLeavesNothing",
		rule:       "a consumer killed with SIGKILL inside the handler leaves neither effect nor id, the id does not stay in flight, and the redelivery applies once (docs/DESIGN.md Q2)",
		persistent: true,
		serial:     true,
		run:        killedInsideHandlerLeavesNothing,
	},
}

package storetest

import "testing"

// testCase is one case of the suite: a rule of the contract, and the run
// that checks a store keeps it.
type testCase struct {
	name string
	// rule is what the case checks, in words, with the ids of the rules
	// of docs/DESIGN.md it rests on. A failing case ends with it.
	rule       string
	persistent bool // runs only for persistent stores
	serial     bool // starts processes or many goroutines: not in parallel
	run        func(t testing.TB, h *Harness)
}

// check runs the case and, when it fails, states the rule the store broke.
func (c *testCase) check(t testing.TB, h *Harness) {
	defer func() {
		if t.Failed() {
			t.Errorf("the store breaks the rule: %s", c.rule)
		}
	}()
	c.run(t, h)
}

// suite is every case, in the order Run runs them. Rule ids (docs/DESIGN.md E1, K2, …)
// are those of docs/DESIGN.md; "store.go" is the Store and Tx contract as
// the idem package documents it.
var suite = []testCase{
	// The Guard over the store: what a caller of Guard.Do sees.
	{
		name: "FirstExecutionRunsOnceAndRecords",
		rule: "the first call of a key runs the work once, and its effect and its result commit together (docs/DESIGN.md E1)",
		run:  firstExecutionRunsOnceAndRecords,
	},
	{
		name: "RetryReplaysIdenticalResultWithoutRunning",
		rule: "a retry of a completed key gets the original status, headers and body byte for byte, and the work does not run (docs/DESIGN.md E4)",
		run:  retryReplaysIdenticalResultWithoutRunning,
	},
	{
		name: "EmptyResultReplays",
		rule: "a result without status, headers or body is recorded and replayed like any other (docs/DESIGN.md E4)",
		run:  emptyResultReplays,
	},
	{
		name: "MismatchNeitherRunsNorReplays",
		rule: "the same key with another fingerprint fails with ErrMismatch: the work does not run, nothing is replayed and the record stays (docs/DESIGN.md E5)",
		run:  mismatchNeitherRunsNorReplays,
	},
	{
		name: "WorkErrorRollsBackAndRecordsNothing",
		rule: "a work that returns an error has its effect rolled back and nothing recorded, so that the retry runs it (docs/DESIGN.md E1, E6)",
		run:  workErrorRollsBackAndRecordsNothing,
	},
	{
		name: "WorkPanicRollsBackAndRecordsNothing",
		rule: "a work that panics has its effect rolled back, nothing recorded and the key freed (docs/DESIGN.md E1, E6)",
		run:  workPanicRollsBackAndRecordsNothing,
	},
	{
		name: "ScopesAreIndependent",
		rule: "the same key in two scopes names two calls: one scope never gets the other's result, nor a mismatch caused by it (docs/DESIGN.md K2)",
		run:  scopesAreIndependent,
	},
	{
		name: "CommitsWhenCallerGivesUpAfterWork",
		rule: "a work that succeeded commits with its result even when its caller gave up meanwhile, so that the caller's retry is a replay (docs/DESIGN.md E1, E4)",
		run:  commitsWhenCallerGivesUpAfterWork,
	},

	// The Store and Tx contract, driven directly.
	{
		name: "BeginLocksTheKeyUntilTheTxEnds",
		rule: "Begin try-locks the key: while a Tx holds it, another Begin of the key fails with ErrInFlight at once, and the key is free again once the Tx ends (docs/DESIGN.md E3)",
		run:  beginLocksTheKeyUntilTheTxEnds,
	},
	{
		name: "RollbackAfterTheEndIsANoOp",
		rule: "Rollback after Commit or after Rollback does nothing and returns nil; it never undoes a commit (the contract of idem.Tx)",
		run:  rollbackAfterTheEndIsANoOp,
	},
	{
		name: "LookupOfAMissingRecordIsNotFound",
		rule: "Inspector.Lookup of a key without a record fails with ErrNotFound (the contract of idem.Inspector)",
		run:  lookupOfAMissingRecordIsNotFound,
	},
	{
		name: "CommitReplacesAnExpiredRecord",
		rule: "from its expiry on a record no longer holds its key: Begin opens a Tx, and Commit replaces the expired record (docs/DESIGN.md E7)",
		run:  commitReplacesAnExpiredRecord,
	},
	{
		name: "CommitNeverReplacesARecordLiveAtItsNow",
		rule: "Commit judges expiry at CommitParams.Now: a record live then is never overwritten, even one Begin saw expired, and Commit fails with ErrConflict (docs/DESIGN.md E2, E7)",
		run:  commitNeverReplacesARecordLiveAtItsNow,
	},
	{
		name: "CommitMeetingALiveRecordConflicts",
		rule: "the storage, not the lock, keeps (scope, key) unique: a Commit that meets a live record written behind the lock fails with ErrConflict, rolls the effect back and leaves that record as it was (docs/DESIGN.md E2)",
		run:  commitMeetingALiveRecordConflicts,
	},
	{
		name: "CommitNeverDeletesALiveRecordThatReplacedAnExpiredOne",
		rule: "an expired record is replaced only while it is expired: a live record committed in its place behind the lock is neither deleted nor overwritten, and Commit fails with ErrConflict (docs/DESIGN.md E2, E7, and the pitfall \"replacing an expired record by key alone\")",
		run:  commitNeverDeletesALiveRecordThatReplacedAnExpiredOne,
	},
	{
		name: "RecordCommitsInTheEffectsTransaction",
		rule: "the record is written in the effect's transaction: when the record cannot be written the effect does not commit, and when the transaction cannot commit no record is left and Commit fails with an error that is not ErrConflict (docs/DESIGN.md E1, and the pitfall \"storing the result after the response, outside the effect's transaction\")",
		run:  recordCommitsInTheEffectsTransaction,
	},
	{
		name: "WorkThatEndsItsTransactionRecordsNothing",
		rule: "a record commits only in the transaction Begin opened: when the work ended it itself (COMMIT or ROLLBACK through the handle), Do fails and nothing is recorded (docs/DESIGN.md E1)",
		run:  workThatEndsItsTransactionRecordsNothing,
	},
	{
		name: "RefusedCallerNeverGetsAnExpiredRecord",
		rule: "a caller refused because the key is in flight gets ErrInFlight, never the key's expired record nor a replay of it (docs/DESIGN.md E3, E7)",
		run:  refusedCallerNeverGetsAnExpiredRecord,
	},

	// Expiry.
	{
		name: "ExpiredRecordBehavesAsNew",
		rule: "a record is replayed until it expires; from then on the key behaves as new, also with another fingerprint (docs/DESIGN.md E7)",
		run:  expiredRecordBehavesAsNew,
	},
	{
		name: "RequestTTLOverridesDefault",
		rule: "a request's TTL sets when its record expires (docs/DESIGN.md E7)",
		run:  requestTTLOverridesDefault,
	},
	{
		name: "SweepDeletesOnlyExpiredRecords",
		rule: "DeleteExpired deletes expired records in batches of at most its Limit, a full batch while enough remain, and never a live record (docs/DESIGN.md E7)",
		run:  sweepDeletesOnlyExpiredRecords,
	},

	// Concurrency, with real goroutines.
	{
		name:   "ConcurrentDuplicatesRunOnceAndAreRefusedAtOnce",
		rule:   "callers racing on one key run the work once; every other caller is refused with ErrInFlight while it runs, without waiting for it (docs/DESIGN.md E2, E3)",
		serial: true,
		run:    concurrentDuplicatesRunOnceAndAreRefusedAtOnce,
	},
	{
		name:   "ConcurrentRetriesAfterCompletionAllReplay",
		rule:   "concurrent retries of a completed key all replay it, and none runs the work (docs/DESIGN.md E2, E4)",
		serial: true,
		run:    concurrentRetriesAfterCompletionAllReplay,
	},
	{
		name:   "ManyKeysConcurrentlyEachRunOnce",
		rule:   "concurrent first calls of different keys each run their own work once and record their own result (docs/DESIGN.md E2)",
		serial: true,
		run:    manyKeysConcurrentlyEachRunOnce,
	},
	{
		name:   "WorkRunsOnceWhileRetriesRace",
		rule:   "a retry that races the first execution's commit never runs the work again: Begin reads the record after it holds the lock, and the lock is held until the record has committed (docs/DESIGN.md E2, E3, and the pitfall \"snapshot before lock\")",
		serial: true,
		run:    workRunsOnceWhileRetriesRace,
	},

	// Durability, for persistent stores.
	{
		name:       "RecordSurvivesReopen",
		rule:       "a committed record and its effect survive closing and reopening the store, and are replayed afterwards (docs/DESIGN.md E1)",
		persistent: true,
		run:        recordSurvivesReopen,
	},
	{
		name:       "KilledInsideWorkLeavesNeitherEffectNorKey",
		rule:       "a process killed inside the work leaves neither its effect nor its key, and the key does not stay in flight (docs/DESIGN.md E1, E3)",
		persistent: true,
		serial:     true,
		run:        killedInsideWorkLeavesNeitherEffectNorKey,
	},
}

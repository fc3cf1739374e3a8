package storetest

import "github.com/idemkit/idem/internal/conformance"

// suite is every case, in the order Run runs them. Rule ids (docs/DESIGN.md E1, K2, …)
// are those of docs/DESIGN.md; "store.go" is the Store and Tx contract as
// the idem package documents it.
var suite = conformance.Suite[*Harness]{
	Subject:  "store",
	Validate: (*Harness).Validate,
	ChildEnv: crashChildEnv,
	Child:    runCrashChild,
	Cases: []conformance.Case[*Harness]{
		// The Guard over the store: what a caller of Guard.Do sees.
		{
			Name: "FirstExecutionRunsOnceAndRecords",
			Rule: "the first call of a key runs the work once, and its effect and its result commit together (docs/DESIGN.md E1)",
			Run:  firstExecutionRunsOnceAndRecords,
		},
		{
			Name: "RetryReplaysIdenticalResultWithoutRunning",
			Rule: "a retry of a completed key gets the original status, headers and body byte for byte, and the work does not run (docs/DESIGN.md E4)",
			Run:  retryReplaysIdenticalResultWithoutRunning,
		},
		{
			Name: "EmptyResultReplays",
			Rule: "a result without status, headers or body is recorded and replayed like any other (docs/DESIGN.md E4)",
			Run:  emptyResultReplays,
		},
		{
			Name: "MismatchNeitherRunsNorReplays",
			Rule: "the same key with another fingerprint fails with ErrMismatch: the work does not run, nothing is replayed and the record stays (docs/DESIGN.md E5)",
			Run:  mismatchNeitherRunsNorReplays,
		},
		{
			Name: "WorkErrorRollsBackAndRecordsNothing",
			Rule: "a work that returns an error has its effect rolled back and nothing recorded, so that the retry runs it (docs/DESIGN.md E1, E6)",
			Run:  workErrorRollsBackAndRecordsNothing,
		},
		{
			Name: "WorkPanicRollsBackAndRecordsNothing",
			Rule: "a work that panics has its effect rolled back, nothing recorded and the key freed (docs/DESIGN.md E1, E6)",
			Run:  workPanicRollsBackAndRecordsNothing,
		},
		{
			Name: "ScopesAreIndependent",
			Rule: "the same key in two scopes names two calls: one scope never gets the other's result, nor a mismatch caused by it (docs/DESIGN.md K2)",
			Run:  scopesAreIndependent,
		},
		{
			Name: "CommitsWhenCallerGivesUpAfterWork",
			Rule: "a work that succeeded commits with its result even when its caller gave up meanwhile, so that the caller's retry is a replay (docs/DESIGN.md E1, E4)",
			Run:  commitsWhenCallerGivesUpAfterWork,
		},

		// The Store and Tx contract, driven directly.
		{
			Name: "BeginLocksTheKeyUntilTheTxEnds",
			Rule: "Begin try-locks the key: while a Tx holds it, another Begin of the key fails with ErrInFlight at once, and the key is free again once the Tx ends (docs/DESIGN.md E3)",
			Run:  beginLocksTheKeyUntilTheTxEnds,
		},
		{
			Name: "RollbackAfterTheEndIsANoOp",
			Rule: "Rollback after Commit or after Rollback does nothing and returns nil; it never undoes a commit (the contract of idem.Tx)",
			Run:  rollbackAfterTheEndIsANoOp,
		},
		{
			Name: "LookupOfAMissingRecordIsNotFound",
			Rule: "Inspector.Lookup of a key without a record fails with ErrNotFound (the contract of idem.Inspector)",
			Run:  lookupOfAMissingRecordIsNotFound,
		},
		{
			Name: "CommitReplacesAnExpiredRecord",
			Rule: "from its expiry on a record no longer holds its key: Begin opens a Tx, and Commit replaces the expired record (docs/DESIGN.md E7)",
			Run:  commitReplacesAnExpiredRecord,
		},
		{
			Name: "CommitNeverReplacesARecordLiveAtItsNow",
			Rule: "Commit judges expiry at CommitParams.Now: a record live then is never overwritten, even one Begin saw expired, and Commit fails with ErrConflict (docs/DESIGN.md E2, E7)",
			Run:  commitNeverReplacesARecordLiveAtItsNow,
		},
		{
			Name: "CommitMeetingALiveRecordConflicts",
			Rule: "the storage, not the lock, keeps (scope, key) unique: a Commit that meets a live record written behind the lock fails with ErrConflict (an error that names the record by digest, never by its key), rolls the effect back and leaves that record as it was (docs/DESIGN.md E2)",
			Run:  commitMeetingALiveRecordConflicts,
		},
		{
			Name: "CommitNeverDeletesALiveRecordThatReplacedAnExpiredOne",
			Rule: "an expired record is replaced only while it is expired: a live record committed in its place behind the lock is neither deleted nor overwritten, and Commit fails with ErrConflict (docs/DESIGN.md E2, E7, and the pitfall \"replacing an expired record by key alone\")",
			Run:  commitNeverDeletesALiveRecordThatReplacedAnExpiredOne,
		},
		{
			Name: "RecordCommitsInTheEffectsTransaction",
			Rule: "the record is written in the effect's transaction: when the record cannot be written the effect does not commit, and when the transaction cannot commit no record is left and Commit fails with an error that is not ErrConflict (docs/DESIGN.md E1, and the pitfall \"storing the result after the response, outside the effect's transaction\")",
			Run:  recordCommitsInTheEffectsTransaction,
		},
		{
			Name: "WorkThatEndsItsTransactionRecordsNothing",
			Rule: "a record commits only in the transaction Begin opened: when the work ended it itself (COMMIT or ROLLBACK through the handle), Do fails and nothing is recorded (docs/DESIGN.md E1)",
			Run:  workThatEndsItsTransactionRecordsNothing,
		},
		{
			Name: "RefusedCallerNeverGetsAnExpiredRecord",
			Rule: "a caller refused because the key is in flight gets ErrInFlight, never the key's expired record nor a replay of it (docs/DESIGN.md E3, E7)",
			Run:  refusedCallerNeverGetsAnExpiredRecord,
		},

		// Expiry.
		{
			Name: "ExpiredRecordBehavesAsNew",
			Rule: "a record is replayed until it expires; from then on the key behaves as new, also with another fingerprint (docs/DESIGN.md E7)",
			Run:  expiredRecordBehavesAsNew,
		},
		{
			Name: "RequestTTLOverridesDefault",
			Rule: "a request's TTL sets when its record expires (docs/DESIGN.md E7)",
			Run:  requestTTLOverridesDefault,
		},
		{
			Name: "SweepDeletesOnlyExpiredRecords",
			Rule: "DeleteExpired deletes expired records in batches of at most its Limit, a full batch while enough remain, and never a live record (docs/DESIGN.md E7)",
			Run:  sweepDeletesOnlyExpiredRecords,
		},

		// Concurrency, with real goroutines.
		{
			Name:   "ConcurrentDuplicatesRunOnceAndAreRefusedAtOnce",
			Rule:   "callers racing on one key run the work once; every other caller is refused with ErrInFlight while it runs, without waiting for it (docs/DESIGN.md E2, E3)",
			Serial: true,
			Run:    concurrentDuplicatesRunOnceAndAreRefusedAtOnce,
		},
		{
			Name:   "ConcurrentRetriesAfterCompletionAllReplay",
			Rule:   "concurrent retries of a completed key all replay it, and none runs the work (docs/DESIGN.md E2, E4)",
			Serial: true,
			Run:    concurrentRetriesAfterCompletionAllReplay,
		},
		{
			Name:   "ManyKeysConcurrentlyEachRunOnce",
			Rule:   "concurrent first calls of different keys each run their own work once and record their own result (docs/DESIGN.md E2)",
			Serial: true,
			Run:    manyKeysConcurrentlyEachRunOnce,
		},
		{
			Name:   "WorkRunsOnceWhileRetriesRace",
			Rule:   "a retry that races the first execution's commit never runs the work again: Begin reads the record after it holds the lock, and the lock is held until the record has committed (docs/DESIGN.md E2, E3, and the pitfall \"snapshot before lock\")",
			Serial: true,
			Run:    workRunsOnceWhileRetriesRace,
		},

		// Waiting for a concurrent duplicate (Request.Wait), from another
		// Guard on the same store location, as another process would.
		{
			Name:   "WaiterGetsTheHolderAnswer",
			Rule:   "a call with a Wait that another Guard's call holds the key of gets that call's recorded answer as a replay once it commits, without running its work (docs/DESIGN.md E3, E4)",
			Serial: true,
			Run:    waiterGetsTheHolderAnswer,
		},
		{
			Name:   "WaiterPastItsBoundIsRefused",
			Rule:   "a call whose Wait runs out while the key is still held is refused with ErrInFlight and runs nothing (docs/DESIGN.md E3)",
			Serial: true,
			Run:    waiterPastItsBoundIsRefused,
		},
		{
			Name:   "WaiterRunsAfterAFailedHolder",
			Rule:   "a call waiting on a holder whose work fails and records nothing runs its own work once the holder has ended, never while it runs (docs/DESIGN.md E3, E6)",
			Serial: true,
			Run:    waiterRunsAfterAFailedHolder,
		},
		{
			Name:   "WaiterStopsWhenItsContextEnds",
			Rule:   "a waiting call whose context ends stops waiting, with an error matching ErrInFlight and the context's error, and runs nothing (docs/DESIGN.md E3)",
			Serial: true,
			Run:    waiterStopsWhenItsContextEnds,
		},

		// Durability, for persistent stores.
		{
			Name:  "RecordSurvivesReopen",
			Rule:  "a committed record and its effect survive closing and reopening the store, and are replayed afterwards (docs/DESIGN.md E1)",
			Needs: persistent,
			Run:   recordSurvivesReopen,
		},
		{
			Name:   "KilledInsideWorkLeavesNeitherEffectNorKey",
			Rule:   "a process killed inside the work leaves neither its effect nor its key, and the key does not stay in flight (docs/DESIGN.md E1, E3)",
			Needs:  persistent,
			Serial: true,
			Run:    killedInsideWorkLeavesNeitherEffectNorKey,
		},
	},
}

// persistent says that h's store is persistent, as the re-open and crash
// cases need.
func persistent(h *Harness) bool { return h.Persistent }

package leasetest

import "github.com/idemkit/idem/internal/conformance"

// suite is every case, in the order Run runs them. "leased_store.go" is
// the LeasedStore contract as the idem package documents it.
var suite = conformance.Suite[*Harness]{
	Subject:  "store",
	Validate: (*Harness).Validate,
	ChildEnv: crashChildEnv,
	Child:    runCrashChild,
	Cases: []conformance.Case[*Harness]{
		// Claims (claim_cases.go).
		{
			Name: "NewClaimIsPendingWithALease",
			Rule: "a claim of a new key writes a pending record with Attempts 1, LeaseUntil = Now + Lease, the claim's Kind, Input and TTL, ExpiresAt = idem.PendingExpiresAt and a token of at least Now.UnixMicro() that the claim's Lease carries (docs/DESIGN.md L1, leased_store.go)",
			Run:  newClaimIsPendingWithALease,
		},
		{
			Name: "LiveLeaseIsNotClaimable",
			Rule: "a pending record under a live lease (Now < LeaseUntil) is returned unclaimed and unchanged, even to its own fingerprint (docs/DESIGN.md L1)",
			Run:  liveLeaseIsNotClaimable,
		},
		{
			Name: "EndedLeaseIsTakenOverWithAGreaterToken",
			Rule: "a pending record whose lease has ended (LeaseUntil <= Now) is taken over by its fingerprint with a greater token, Attempts + 1 and a new lease, keeping its CreatedAt, Kind, Input and TTL, and the new holder receives the saved steps in the order they were saved (docs/DESIGN.md L1, L3)",
			Run:  endedLeaseIsTakenOverWithAGreaterToken,
		},
		{
			Name: "AnotherFingerprintNeverTakesOver",
			Rule: "a pending record is never claimed by another fingerprint, however long its lease has ended: the record is returned unclaimed and unchanged, with its steps (docs/DESIGN.md L1, E5)",
			Run:  anotherFingerprintNeverTakesOver,
		},
		{
			Name: "CompletedRecordIsReturnedUnclaimed",
			Rule: "a completed record that has not expired is returned unclaimed, to any fingerprint, with its result byte for byte: status, headers and body (docs/DESIGN.md L1, E4)",
			Run:  completedRecordIsReturnedUnclaimed,
		},
		{
			Name: "ExpiredCompletedRecordIsReplaced",
			Rule: "a completed record that has expired (ExpiresAt <= Now) is replaced by a new pending record with a greater token, Attempts 1, the new claim's fingerprint, Kind, Input and TTL, and none of the old steps (docs/DESIGN.md L1, E7)",
			Run:  expiredCompletedRecordIsReplaced,
		},
		{
			Name: "ReplacementTokenGrowsWhenTheClockIsBehind",
			Rule: "a record that replaces an expired one gets a token above the old one even when Now.UnixMicro() is below it (the old token plus one), so a holder of the old record stays fenced across clock skew (docs/DESIGN.md L1, L2)",
			Run:  replacementTokenGrowsWhenTheClockIsBehind,
		},
		{
			Name: "DeletedRecordStillGetsAGreaterToken",
			Rule: "a key whose record was deleted gets, at its next claim, a token above any it had before: at least Now.UnixMicro() (docs/DESIGN.md L1, L2)",
			Run:  deletedRecordStillGetsAGreaterToken,
		},
		{
			Name: "ClaimKeepsTheCallsTTL",
			Rule: "a new record keeps the claim's TTL (returned, read back and listed by Abandoned), a takeover keeps the record's TTL whatever its own, after a release too, and a record that replaces an expired one takes the new claim's TTL (docs/DESIGN.md L5, E7, leased_store.go)",
			Run:  claimKeepsTheCallsTTL,
		},
		{
			Name:   "ConcurrentClaimsOfANewKeyClaimOnce",
			Rule:   "of many concurrent claims of a new key exactly one succeeds; the others get its pending record unclaimed (docs/DESIGN.md L1, E2)",
			Serial: true,
			Run:    concurrentClaimsOfANewKeyClaimOnce,
		},
		{
			Name:   "ConcurrentTakeoversClaimOnce",
			Rule:   "of many concurrent claims of a record whose lease has ended exactly one takes it over; the others get its record unclaimed (docs/DESIGN.md L1)",
			Serial: true,
			Run:    concurrentTakeoversClaimOnce,
		},

		// Fencing (fence_cases.go).
		{
			Name: "StaleHolderWritesNothing",
			Rule: "every write of a holder whose lease was taken over, or with a token never issued (Heartbeat, SaveStep, Complete, Release, BeginStep) fails with ErrFenced and changes neither the record nor its steps (docs/DESIGN.md L2)",
			Run:  staleHolderWritesNothing,
		},
		{
			Name: "WritesOnACompletedRecordAreRefused",
			Rule: "once a record is completed, every write of its former holder fails with ErrFenced and the completed record and its result stay as they are (docs/DESIGN.md L2, E4)",
			Run:  writesOnACompletedRecordAreRefused,
		},
		{
			Name: "FencedErrorsNameNoScopeOrKey",
			Rule: "the error of a refused write (ErrFenced) names neither the record's scope nor its key, which may hold a principal derived from a credential and which the completer and the transports would log; name them by idem.KeyHash (docs/DESIGN.md L2, L5)",
			Run:  fencedErrorsNameNoScopeOrKey,
		},
		{
			Name: "HeartbeatExtendsTheLease",
			Rule: "a heartbeat of the current holder sets LeaseUntil = Now + Duration, and the record cannot be taken over before that (docs/DESIGN.md L1)",
			Run:  heartbeatExtendsTheLease,
		},
		{
			Name: "ReleaseEndsTheLeaseAndKeepsSteps",
			Rule: "Release keeps the record pending with LeaseUntil = RetryAt and LastError = its Error, so that it is claimable from RetryAt on, and the next holder receives the steps (docs/DESIGN.md L1, L3)",
			Run:  releaseEndsTheLeaseAndKeepsSteps,
		},

		// Steps (step_cases.go).
		{
			Name: "SavingAStepAgainReplacesItsOutput",
			Rule: "saving a step under a name already saved replaces its output: the next holder receives that step once, with the last output (docs/DESIGN.md L3)",
			Run:  savingAStepAgainReplacesItsOutput,
		},
		{
			Name: "BytesRoundTrip",
			Rule: "Input, step outputs and results are opaque bytes: all 256 byte values come back unchanged, an empty or nil output is a saved step, and an empty input and result are kept (docs/DESIGN.md L3, E4)",
			Run:  bytesRoundTrip,
		},
		{
			Name: "LocalStepCommitsWithItsEffect",
			Rule: "a local step's effect and its recovery point commit together: neither is visible before StepTx.Commit, both are after (docs/DESIGN.md L3)",
			Run:  localStepCommitsWithItsEffect,
		},
		{
			Name: "LocalStepRollbackLeavesNothing",
			Rule: "a local step rolled back leaves neither its effect nor its recovery point, and leaves the record free for its holder and for a later takeover (docs/DESIGN.md L3)",
			Run:  localStepRollbackLeavesNothing,
		},
		{
			Name: "StaleLocalStepNeverCommitsAfterATakeover",
			Rule: "a local step open when its lease ends either keeps the record from being taken over until it ends, or has its commit refused with ErrFenced: a new holder never coexists with the stale step's effect, and a step's effect is applied exactly when its recovery point is recorded (docs/DESIGN.md L2, L3)",
			Run:  staleLocalStepNeverCommitsAfterATakeover,
		},
		{
			Name: "LocalStepCannotCommitOnACompletedRecord",
			Rule: "a local step open when its record is completed either makes the completion wait until it ends, or has its commit refused with ErrFenced: a step never commits on a completed record, and its effect is applied exactly when its commit succeeds (docs/DESIGN.md L2, L3)",
			Run:  localStepCannotCommitOnACompletedRecord,
		},

		// Abandoned records (abandoned_cases.go).
		{
			Name: "AbandonedListsEndedLeasesLongestEndedFirst",
			Rule: "Abandoned returns the pending records whose lease has ended at Now (released ones included once RetryAt has passed), the longest ended first, and never a live lease or a completed record (docs/DESIGN.md L5)",
			Run:  abandonedListsEndedLeasesLongestEndedFirst,
		},
		{
			Name: "AbandonedHonoursItsLimit",
			Rule: "Abandoned returns at most Limit records, the longest ended first (docs/DESIGN.md L5)",
			Run:  abandonedHonoursItsLimit,
		},

		// The engine over the store: what a caller of idem.Leased sees
		// (engine_cases.go).
		{
			Name: "EngineReplaysACompletedCall",
			Rule: "through idem.Leased, a retry of a completed call is replayed with the recorded status, headers and body byte for byte, and the work does not run again (docs/DESIGN.md L1, E4)",
			Run:  engineReplaysACompletedCall,
		},
		{
			Name: "EngineRefusesAnotherFingerprint",
			Rule: "through idem.Leased, a call with another fingerprint fails with ErrMismatch, while the key is held and after it completed, and its work does not run (docs/DESIGN.md L1, E5)",
			Run:  engineRefusesAnotherFingerprint,
		},
		{
			Name: "EngineAnswersInFlightDuringALiveLease",
			Rule: "through idem.Leased, a call during another's live lease fails at once with an *InFlightError whose RetryAfter is at least a second and at most the lease, and its work does not run (docs/DESIGN.md L1, E3)",
			Run:  engineAnswersInFlightDuringALiveLease,
		},
		{
			Name:   "EngineRunsConcurrentCallsOnce",
			Rule:   "through idem.Leased, concurrent calls of one key run the work once; every other call is in flight or replays its result (docs/DESIGN.md L1, E2)",
			Serial: true,
			Run:    engineRunsConcurrentCallsOnce,
		},
		{
			Name: "EngineResumesAfterAFailedAttempt",
			Rule: "through idem.Leased, a failed attempt releases the key with its steps, and the retry resumes after the last recorded step with its output without running it again (docs/DESIGN.md L3)",
			Run:  engineResumesAfterAFailedAttempt,
		},
		{
			Name: "EngineFencesAStaleHolder",
			Rule: "through idem.Leased, a holder whose lease was taken over while its work paused has its later step and its result refused with ErrFenced, and they are seen by no later holder (docs/DESIGN.md L2)",
			Run:  engineFencesAStaleHolder,
		},
		{
			Name: "EngineHeartbeatStopsAFencedHolder",
			Rule: "through idem.Leased with real heartbeats, a holder whose lease was taken over has its next heartbeat refused: its work's context is cancelled with a cause matching ErrFenced, its Do fails with ErrFenced, and its successor's result stands (docs/DESIGN.md L1, L2)",
			Run:  engineHeartbeatStopsAFencedHolder,
		},
		{
			Name: "EngineLocalStepsCommitWithTheirEffects",
			Rule: "through idem.Leased, a local step's effect commits with its recovery point and is not redone by the retry, and a local step that fails leaves no effect (docs/DESIGN.md L3)",
			Run:  engineLocalStepsCommitWithTheirEffects,
		},
		{
			Name: "CompleterFinishesAbandonedWork",
			Rule: "the completer finds the pending records whose lease has ended, and only those, runs their registered kind from the last recorded step and records the result, which the client's retry replays (docs/DESIGN.md L3, L5)",
			Run:  completerFinishesAbandonedWork,
		},

		{
			Name: "CompleterCompletesWithTheCallsTTL",
			Rule: "a call claimed with a TTL and finished by the completer, or by a retry without a TTL of its own that takes it over, expires at completion + the call's TTL, not the engine's default: a retry 48 h later, within the call's 7 days, is replayed and the work does not run again (docs/DESIGN.md L5, E7)",
			Run:  completerCompletesWithTheCallsTTL,
		},

		// Durability, for persistent stores (persistence_cases.go).
		{
			Name:  "PendingRecordAndStepsSurviveReopen",
			Rule:  "a pending record with its steps, and a completed record with its result, survive closing and reopening the store (docs/DESIGN.md L1, L3)",
			Needs: persistent,
			Run:   pendingRecordAndStepsSurviveReopen,
		},
		{
			Name:   "KilledHolderIsTakenOverFromItsLastStep",
			Rule:   "a holder killed with SIGKILL after a step leaves its key in flight until its lease ends; then a new holder takes it over and resumes after the step without running it again (docs/DESIGN.md L1, L3)",
			Needs:  persistent,
			Serial: true,
			Run:    killedHolderIsTakenOverFromItsLastStep,
		},
	},
}

// persistent says that h's store is persistent, as the re-open and crash
// cases need.
func persistent(h *Harness) bool { return h.Persistent }

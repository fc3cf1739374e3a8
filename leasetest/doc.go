// Package leasetest is the conformance suite of idem.LeasedStore: every
// leased-mode store runs it, as atomic stores run storetest.
//
// A store package calls Run from a top-level test with a Harness that says
// how to open the store and, for a store whose local steps write in its own
// database (an idem.LeasedTxStore), how to write and count a test effect
// through a step's transaction:
//
//	func TestLeasedConformance(t *testing.T) {
//		leasetest.Run(t, leasetest.Harness{
//			NewLocation:  func(t testing.TB) string { return filepath.Join(t.TempDir(), "idem.db") },
//			Open:         openStore, // creates the effects table too
//			Close:        func(s idem.LeasedStore) error { return s.(*mystore.Store).Close() },
//			Persistent:   true,
//			Effect:       func(ctx context.Context, name string) error { return execTx(ctx, `INSERT INTO effects (name) VALUES (?)`, name) },
//			CountEffects: countEffects,
//		})
//	}
//
// Each case gets a location of its own and expects it empty: Abandoned and
// the completer see every record of the store.
//
// # Cases
//
// The cases are one explicit list (suite.go), each a subtest named after
// what it checks, with the rule it checks in words and the ids of
// docs/DESIGN.md's leased-mode rules (L1 to L5); a failing case ends its
// output with "the store breaks the rule: " and that rule. They come in
// groups, one file each:
//
//   - claims (claim_cases.go): a new claim, a live lease, a takeover and
//     its token, another fingerprint, completed and expired records,
//     tokens across deletion and clock skew, 50 concurrent claimers;
//   - fencing (fence_cases.go): every write of a stale holder, or on a
//     completed record, fails with idem.ErrFenced and changes nothing;
//     heartbeats and releases;
//   - steps (step_cases.go): outputs replaced and kept byte for byte, local
//     steps committed or rolled back with their effect, a local step
//     against a takeover and a completion;
//   - abandoned records (abandoned_cases.go): which, in which order, how
//     many;
//   - the engine (engine_cases.go): idem.Leased and idem.Completer over the
//     store, with real goroutines: replay, mismatch, in flight, one
//     execution among concurrent calls, resumption, fencing of a paused
//     holder and of one whose heartbeat is refused, local steps, and the
//     completer finishing abandoned work;
//   - durability (persistence_cases.go), for persistent stores: records
//     and steps survive a reopen, and a holder killed with SIGKILL is taken
//     over from its last step.
//
// The store-level cases pass the times of a test clock in the params
// (stores never read a clock), so none of them sleeps; the engine cases
// run on that clock too, except one that needs real heartbeats.
//
// The crash case kills a child process: the test binary itself, started
// with -test.run naming the test that called Run, so Run must be called
// from a top-level test (not from inside t.Run).
//
// # Testing the suite
//
// The package's own tests run the suite against memstore broken one way
// each (an unfenced SaveStep, a takeover without a new token, a claim
// under a live lease, …) and check that the cases meant for each defect
// fail, while memstore and a small persistent store kept in a file pass.
package leasetest

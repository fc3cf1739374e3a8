// Package storetest is the conformance suite that every idem.Store runs.
//
// A store package calls Run from a top-level test with a Harness that
// says how to open the store, how to write and count a test effect
// through the store's transaction, and, through optional hooks, how to
// break that transaction the ways only the store's driver can:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			NewLocation:  func(t testing.TB) string { return filepath.Join(t.TempDir(), "idem.db") },
//			Open:         openStore, // creates the effects table too
//			Close:        func(s idem.Store) error { return s.(*mystore.Store).Close() },
//			Persistent:   true,
//			Effect:       func(ctx context.Context, name string) error { return execTx(ctx, `INSERT INTO effects (name) VALUES (?)`, name) },
//			CountEffects: countEffects,
//			PlantRecord:  plantRecord,
//			EndTx:        func(ctx context.Context, end storetest.TxEnd) error { return execTx(ctx, string(end)) },
//			FailCommit:   func(ctx context.Context) error { return execTx(ctx, `INSERT INTO doomed (parent) VALUES (1)`) },
//		})
//	}
//
// where execTx runs a statement through the transaction the context
// carries (the store's TxFrom).
//
// # Hooks
//
// Through Guard.Do alone the suite could only check the transaction rules
// the Guard happens to exercise. The hooks let it check the others on
// every store; each is a few lines of SQL in a harness:
//
//   - PlantRecord commits a live record of a key while a Tx holds that
//     key's lock, as a writer that bypassed the lock would (an INSERT …
//     ON CONFLICT DO UPDATE from another connection). Commit must then
//     fail with idem.ErrConflict, roll its effect back and leave that
//     record as it was: this catches a Commit that overwrites a live
//     record, that deletes the key's record before it inserts, or that
//     writes the record outside the effect's transaction.
//   - EndTx ends the transaction behind the store's back, through its
//     handle (see TxEnd): the store must then record nothing.
//   - FailCommit makes the transaction fail at COMMIT (a row that breaks
//     a deferred constraint): no record may be left, which catches a
//     record committed before, or apart from, the effect.
//
// A case that needs a hook the harness leaves nil is skipped.
//
// # Cases
//
// The cases are one explicit list (suite.go), run in its order, each a
// subtest named after what it checks. Each carries the rule of the
// contract it checks, in words, with the ids of docs/DESIGN.md (E1, K2,
// …) or the idem type whose contract it is; a failing case ends its output
// with "the store breaks the rule: " and that rule. The cases drive the
// store both through idem.Guard, as callers do, and through the Store and
// Tx methods directly.
//
// The cases for persistent stores re-open the store and kill a child
// process with SIGKILL inside the work. The child is the test binary
// itself, started with -test.run naming the test that called Run, so Run
// must be called from a top-level test (not from inside t.Run).
//
// # Testing the suite
//
// The package's own tests run the suite against a small reference store
// and against copies of it broken one way each (an upsert that overwrites
// a live record, a read before the lock, …), and check that the case meant
// for each defect fails while the intact store, and memstore, pass.
package storetest

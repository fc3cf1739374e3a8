// Package inboxtest is the conformance suite of the inbox: it runs
// inbox.Inbox on a store and checks, case by case, the rules the inbox
// promises (docs/DESIGN.md Q1, Q2, E7, and the contract written on
// inbox.Process).
//
// A store package, or a program with a store of its own, calls Run from a
// top-level test with a Harness that says how to open the store and how to
// write and count a test effect through the store's transaction:
//
//	func TestInbox(t *testing.T) {
//		inboxtest.Run(t, inboxtest.Harness{
//			NewLocation:  func(t testing.TB) string { return filepath.Join(t.TempDir(), "idem.db") },
//			Open:         openStore, // creates the effects table too
//			Close:        func(s idem.Store) error { return s.(*sqlitestore.Store).Close() },
//			Persistent:   true,
//			Effect:       func(ctx context.Context, name string) error { return execTx(ctx, `INSERT INTO effects (name) VALUES (?)`, name) },
//			CountEffects: countEffects,
//		})
//	}
//
// # Cases
//
// The cases are one explicit list (suite.go), run in its order, each a
// subtest named after what it checks and carrying its rule in words; a
// failing case ends its output with "the inbox breaks the rule: " and
// that rule. They drive the inbox as a broker adapter does: deliveries,
// redeliveries with a growing attempt count, concurrent deliveries from
// many goroutines, an injected clock for expiry, idem.Sweeper for
// clean-up, and, for persistent stores, a child process killed with
// SIGKILL inside the handler and between the commit and the ack.
//
// The child is the test binary itself, started with -test.run naming the
// test that called Run, so Run must be called from a top-level test (not
// from inside t.Run).
package inboxtest

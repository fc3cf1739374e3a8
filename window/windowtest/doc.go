// Package windowtest is the conformance suite that every window.Window
// runs: the two-phase contract that the Window interface documents.
//
// An implementation calls Run from a test with a Harness that makes fresh
// windows and lets time pass for them:
//
//	func TestConformance(t *testing.T) {
//		windowtest.Run(t, windowtest.Harness{
//			New: func(t testing.TB, lease, win time.Duration) (window.Window, func(time.Duration)) {
//				clock := newClock()
//				w, err := window.NewMemory(&window.MemoryConfig{Lease: lease, Window: win, Now: clock.Now})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return w, clock.Advance
//			},
//			Exact: true,
//		})
//	}
//
// A window on an injected clock (Exact) is checked to the nanosecond and
// without a single sleep. A window on real time, such as one in Redis,
// whose keys expire by the server's clock, is checked with short leases
// (Harness.Lease) and sleeps; a check of what must still be live counts
// only when it finished within the time it had, and is tried again when a
// loaded machine stalled it, so the suite does not flake.
//
// # Cases
//
// The cases are one explicit list (suite.go), each a parallel subtest
// named after what it checks, with the rule of the contract it checks, in
// words; a failing case ends its output with "the window breaks the rule:"
// and that rule. They cover reservation, confirmation, release, the expiry
// of a lease and of a window, owner-only confirmation and release, a
// handler that fails (its message is processed on redelivery, not
// dropped), concurrent reservers of one id (exactly one wins, with real
// goroutines), concurrent deliveries through window.Do, and the batch form
// for windows that are a window.Batcher.
//
// # Testing the suite
//
// The package's own tests run the suite against window.Memory, against a
// small reference window, and against copies of the reference broken one
// way each (a Release that ignores the token, a lease that never expires,
// a check-then-set Reserve, …), and check that the cases meant for each
// defect fail.
package windowtest

package windowtest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem/window"
)

// Harness tells the suite how to make windows of one implementation.
type Harness struct {
	// New returns a new window.Window whose leases last lease and whose
	// confirmed ids last window, sharing no id with any other window New
	// returns (for a remote store: its own key prefix, cleaned up with t),
	// and a function that makes d pass for it: one that advances an
	// injected clock, or that sleeps. Required.
	New func(t testing.TB, lease, window time.Duration) (w window.Window, advance func(d time.Duration))

	// Exact says that advance moves an injected clock by exactly d, and
	// that nothing else moves it. The suite then checks the boundaries of
	// leases and windows to the nanosecond, and never waits. Otherwise
	// the windows run on real time, the suite sleeps to let leases and
	// windows end, and it checks what must still be live only when the
	// check ended within the time it had (it tries again otherwise).
	Exact bool

	// Lease is the lease of the windows that the suite lets expire when
	// Exact is false; their windows last three times as long. Shorter
	// runs faster; a check must finish well within it, even on a loaded
	// machine. Defaults to 1 second.
	Lease time.Duration
}

func (h *Harness) validate() error {
	if h.New == nil {
		return errors.New("windowtest: Harness.New is required")
	}
	if h.Lease < 0 {
		return errors.New("windowtest: Harness.Lease is negative")
	}
	return nil
}

// Run runs the conformance suite against the windows h makes, each case a
// parallel subtest of t named after it. A failing case ends with the rule
// of the window.Window contract that the implementation broke, in words.
func Run(t *testing.T, h Harness) {
	t.Helper()
	suite.Run(t, &h)
}

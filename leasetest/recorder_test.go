package leasetest

import (
	"os"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/tbrecord"
)

// caseTimeout bounds one case run under a recorder: a store broken so
// that a case waits for ever fails it instead of hanging the test.
const caseTimeout = 2 * time.Minute

// runSuite runs every case of the suite that h's store qualifies for, one
// after the other, each under a recorder (its failures are kept, not
// reported), and returns their outcomes by case name. As Run does, it
// plays the crash case's child when the test binary runs as one.
func runSuite(t *testing.T, h Harness) map[string]tbrecord.Outcome {
	t.Helper()
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if loc := os.Getenv(crashChildEnv); loc != "" {
		runCrashChild(h, loc) // never returns
	}
	out := make(map[string]tbrecord.Outcome)
	for _, c := range suite {
		if c.persistent && !h.Persistent {
			continue
		}
		out[c.name] = tbrecord.Run(t, c.name, caseTimeout, func(tb testing.TB) { c.check(tb, &h) })
	}
	return out
}

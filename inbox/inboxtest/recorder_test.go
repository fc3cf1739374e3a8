package inboxtest

import (
	"testing"

	"github.com/idemkit/idem/internal/tbrecord"
)

// runSuite runs every case that does not need a persistent store against
// h, each under a recorder (its failures are kept, not reported), and
// returns their outcomes by case name.
func runSuite(t *testing.T, h Harness) map[string]tbrecord.Outcome {
	out := map[string]tbrecord.Outcome{}
	for _, c := range suite {
		if c.persistent {
			continue
		}
		out[c.name] = tbrecord.Run(t, c.name, 0, func(tb testing.TB) { c.check(tb, &h) })
	}
	return out
}

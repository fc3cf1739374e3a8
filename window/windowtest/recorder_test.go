package windowtest

import (
	"sync"
	"testing"

	"github.com/idemkit/idem/internal/tbrecord"
)

// runSuite runs every case against h, each under its own recorder, in
// parallel, and returns how each ended, by name.
func runSuite(t *testing.T, h Harness) map[string]tbrecord.Outcome {
	t.Helper()
	out := make(map[string]tbrecord.Outcome, len(suite))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range suite {
		if c.exactOnly && !h.Exact {
			continue
		}
		wg.Go(func() {
			o := tbrecord.Run(t, c.name, 0, func(tb testing.TB) { c.check(tb, &h) })
			mu.Lock()
			defer mu.Unlock()
			out[c.name] = o
		})
	}
	wg.Wait()
	return out
}

func ruleOf(name string) string {
	for _, c := range suite {
		if c.name == name {
			return c.rule
		}
	}
	return ""
}

package conformance

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/tbrecord"
)

// RecordConfig says how Record runs the cases. A nil *RecordConfig runs
// them one after another, each within the default Timeout.
type RecordConfig struct {
	// Timeout bounds each case (see tbrecord.Run): a case that waits for
	// ever against a broken implementation fails instead of hanging the
	// test. Defaults to 2 minutes.
	Timeout time.Duration
	// Parallel runs the cases that are not serial all at once, after the
	// serial ones, as Run does. Defaults to one after another.
	Parallel bool
}

// Record runs every case that h qualifies for, each under a recorder (its
// failures are kept, not reported), and returns their outcomes by case
// name: the suites' own tests use it to check that a suite passes an
// intact implementation and fails a broken one. Like Run, it validates h
// and plays the suite's crash child when the test binary is one.
func (s *Suite[H]) Record(t *testing.T, h H, cfg *RecordConfig) map[string]tbrecord.Outcome {
	t.Helper()
	timeout, parallel := 2*time.Minute, false
	if cfg != nil {
		parallel = cfg.Parallel
		if cfg.Timeout > 0 {
			timeout = cfg.Timeout
		}
	}
	s.start(t, h)
	out := make(map[string]tbrecord.Outcome)
	var mu sync.Mutex
	record := func(c *Case[H]) {
		o := tbrecord.Run(t, c.Name, timeout, func(tb testing.TB) { s.check(tb, c, h) })
		mu.Lock()
		defer mu.Unlock()
		out[c.Name] = o
	}
	var later []*Case[H]
	for i := range s.Cases {
		c := &s.Cases[i]
		switch {
		case !c.qualifies(h):
		case parallel && !c.Serial:
			later = append(later, c)
		default:
			record(c)
		}
	}
	var wg sync.WaitGroup
	for _, c := range later {
		wg.Go(func() { record(c) })
	}
	wg.Wait()
	return out
}

// Caught checks a recorded run against an implementation with a known
// defect: each case named in caughtBy must have failed and stated its rule
// (see tbrecord.Caught).
func (s *Suite[H]) Caught(t testing.TB, out map[string]tbrecord.Outcome, defect string, caughtBy []string) {
	t.Helper()
	tbrecord.Caught(t, out, defect, caughtBy, s.statement(), s.Rule)
}

// WellFormed checks the cases themselves: each has a unique name, a run
// and a rule, and the rule contains one of cites when any is given.
func (s *Suite[H]) WellFormed(t testing.TB, cites ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range s.Cases {
		switch {
		case c.Name == "" || seen[c.Name]:
			t.Errorf("case %q: the name is empty or not unique", c.Name)
		case c.Run == nil:
			t.Errorf("case %s has no run", c.Name)
		case c.Rule == "":
			t.Errorf("case %s has no rule", c.Name)
		case len(cites) > 0 && !slices.ContainsFunc(cites, func(cite string) bool { return strings.Contains(c.Rule, cite) }):
			t.Errorf("case %s: the rule %q cites none of %q", c.Name, c.Rule, cites)
		}
		seen[c.Name] = true
	}
}

// Package conformance is the skeleton the conformance suites (storetest,
// leasetest, inbox/inboxtest, window/windowtest) share: a suite is a list
// of cases, each a rule of a contract in words and the run that checks an
// implementation keeps it, and this package runs them, as subtests or
// under recorders for the suites' own tests, and states the rule a failing
// case checked.
package conformance

import (
	"os"
	"testing"
)

// Case is one case of a suite over harnesses of type H.
type Case[H any] struct {
	// Name names the case's subtest, in CamelCase.
	Name string
	// Rule is what the case checks, in words, with the ids of the rules
	// of docs/DESIGN.md it rests on where there are any. A failing case
	// ends with it.
	Rule string
	// Needs, when set, says whether a harness has what the case needs (a
	// persistent store, an exact clock); the case runs only when it does.
	Needs func(h H) bool
	// Serial keeps the case out of parallel: it starts processes or many
	// goroutines.
	Serial bool
	// Run checks the rule against the implementation h describes.
	Run func(t testing.TB, h H)
}

// Suite is a conformance suite over harnesses of type H.
type Suite[H any] struct {
	// Subject names what the suite checks ("store", "inbox", …): a
	// failing case ends with "the <Subject> breaks the rule: <Rule>".
	Subject string
	// Cases are the cases, in the order they run.
	Cases []Case[H]
	// Validate, when set, reports what is wrong with a harness; Run and
	// Record fail at once on its error.
	Validate func(h H) error
	// ChildEnv names the environment variable that makes the test binary
	// a crash child of the suite (see internal/crashchild), and Child
	// plays that child: when ChildEnv is set, Run and Record call Child
	// with the harness and the variable's value, and Child never returns.
	// Both are empty for a suite without crash cases.
	ChildEnv string
	Child    func(h H, value string)
}

// Run runs every case that h qualifies for as a subtest of t named after
// it, in parallel unless the case is serial. A failing case ends with the
// rule it checks. When the test binary is the suite's crash child, Run
// plays it instead, and never returns.
func (s *Suite[H]) Run(t *testing.T, h H) {
	t.Helper()
	s.start(t, h)
	for _, c := range s.Cases {
		if !c.qualifies(h) {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if !c.Serial {
				t.Parallel()
			}
			s.check(t, &c, h)
		})
	}
}

// start validates h and, in a crash child, plays the child.
func (s *Suite[H]) start(t testing.TB, h H) {
	t.Helper()
	if s.Validate != nil {
		if err := s.Validate(h); err != nil {
			t.Fatal(err)
		}
	}
	if s.ChildEnv == "" {
		return
	}
	if v := os.Getenv(s.ChildEnv); v != "" {
		s.Child(h, v) // never returns
	}
}

// check runs c and, when it fails, states the rule it checks.
func (s *Suite[H]) check(t testing.TB, c *Case[H], h H) {
	defer func() {
		if t.Failed() {
			t.Errorf("%s%s", s.statement(), c.Rule)
		}
	}()
	c.Run(t, h)
}

// statement is what a failing case's last line starts with.
func (s *Suite[H]) statement() string {
	return "the " + s.Subject + " breaks the rule: "
}

// Rule returns the rule of the case called name, or "" when there is none.
func (s *Suite[H]) Rule(name string) string {
	for _, c := range s.Cases {
		if c.Name == name {
			return c.Rule
		}
	}
	return ""
}

func (c *Case[H]) qualifies(h H) bool {
	return c.Needs == nil || c.Needs(h)
}

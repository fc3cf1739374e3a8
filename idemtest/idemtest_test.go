package idemtest_test

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/internal/check"
	"github.com/idemkit/idem/internal/checktest"
	"github.com/idemkit/idem/internal/tbrecord"
)

// A handler built on idemhttp passes every rule, through Check.
func TestCheckIdemhttp(t *testing.T) {
	t.Parallel()
	h, transfers := newTransfers()
	rep := idemtest.Check(t, h, idemtest.Endpoint{
		Path:       "/transfers",
		Body:       `{"to":"bob","amount":10}`,
		Header:     http.Header{"Authorization": {"Bearer alice"}},
		Principal2: http.Header{"Authorization": {"Bearer bob"}},
		Effects:    func() (int, error) { return int(transfers.Load()), nil },
	})
	if rep.Pass != 8 {
		t.Errorf("%s, want 8 PASS", rep.Summary())
	}
}

func endpoint(s *checktest.Server, counted bool) idemtest.Endpoint {
	e := idemtest.Endpoint{
		Path:       "/payments",
		Body:       `{"to":"bob","amount":10}`,
		Header:     http.Header{"Authorization": {"Bearer alice"}},
		Principal2: http.Header{"Authorization": {"Bearer bob"}},
	}
	if counted {
		e.Effects = func() (int, error) { return s.Effects(), nil }
	}
	return e
}

// Check fails a test for exactly the rules a fixture breaks: the failed
// rules are the errors, named with their evidence; the others are logged.
// The fixtures are audited at once, each under a recording testing.TB.
func TestCheckCatchesEachDefect(t *testing.T) {
	t.Parallel()
	type audit struct {
		name   string
		defect checktest.Defect
		out    tbrecord.Outcome
		rep    *idemtest.Report
	}
	var audits []*audit
	var wg sync.WaitGroup
	for _, d := range checktest.Defects {
		for _, counted := range []bool{true, false} {
			a := &audit{name: fmt.Sprintf("%s/counted=%v", d, counted), defect: d}
			audits = append(audits, a)
			s := checktest.New(checktest.Config{Defect: d})
			wg.Go(func() {
				a.out = tbrecord.Run(t, a.name, 2*time.Minute, func(tb testing.TB) {
					a.rep = idemtest.Check(tb, s, endpoint(s, counted))
				})
			})
		}
	}
	wg.Wait()
	for _, a := range audits {
		t.Run(a.name, func(t *testing.T) {
			want := checktest.Expected(a.defect)
			if a.rep == nil {
				t.Fatalf("no report:\n%s", a.out.Log)
			}
			if got := a.rep.Statuses(); !maps.Equal(got, want) {
				t.Errorf("verdicts %v, want %v\n%s", got, want, a.out.Log)
			}
			anyFail := false
			for _, res := range check.Rules() {
				line := fmt.Sprintf("rule %d %s: %s", res.Rule, res.Name, want[res.Rule])
				if !strings.Contains(a.out.Log, line) {
					t.Errorf("the log lacks %q:\n%s", line, a.out.Log)
				}
				anyFail = anyFail || want[res.Rule] == check.Fail
			}
			if a.out.Failed != anyFail {
				t.Errorf("the test failed: %v, want %v\n%s", a.out.Failed, anyFail, a.out.Log)
			}
		})
	}
}

// An audit that cannot start fails the test and says why.
func TestCheckStopped(t *testing.T) {
	t.Parallel()
	s := checktest.New(checktest.Config{})
	e := endpoint(s, true)
	e.Header = nil
	out := tbrecord.Run(t, "NoCredentials", time.Minute, func(tb testing.TB) { idemtest.Check(tb, s, e) })
	if !out.Failed || !strings.Contains(out.Log, "the audit stopped") || !strings.Contains(out.Log, "401") {
		t.Errorf("failed %v, log:\n%s\nwant a failure naming the 401", out.Failed, out.Log)
	}
	out = tbrecord.Run(t, "BadEndpoint", time.Minute, func(tb testing.TB) {
		idemtest.Check(tb, s, idemtest.Endpoint{Path: "/payments", Concurrency: 1})
	})
	if !out.Failed || !strings.Contains(out.Log, "Concurrency") {
		t.Errorf("failed %v, log:\n%s\nwant a failure naming the field", out.Failed, out.Log)
	}
}

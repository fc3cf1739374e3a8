package conformance

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// harness is what the test suites run against: a name the cases check,
// and what the cases saw.
type harness struct {
	broken, full bool

	mu  sync.Mutex
	ran []string
}

func (h *harness) saw(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ran = append(h.ran, name)
}

func testSuite() *Suite[*harness] {
	return &Suite[*harness]{
		Subject: "thing",
		Cases: []Case[*harness]{
			{Name: "Holds", Rule: "it holds (rule A)", Run: func(t testing.TB, h *harness) {
				h.saw("Holds")
				if h.broken {
					t.Error("it does not hold")
				}
			}},
			{Name: "NeedsFull", Rule: "a full one holds (rule B)", Needs: func(h *harness) bool { return h.full },
				Run: func(t testing.TB, h *harness) { h.saw("NeedsFull") }},
			{Name: "Serial", Rule: "it holds alone (rule C)", Serial: true,
				Run: func(t testing.TB, h *harness) { h.saw("Serial") }},
		},
		Validate: func(h *harness) error {
			if h == nil {
				return errors.New("no harness")
			}
			return nil
		},
	}
}

func TestRecordStatesTheRule(t *testing.T) {
	t.Parallel()
	s := testSuite()
	out := s.Record(t, &harness{broken: true}, nil)
	o := out["Holds"]
	if !o.Failed {
		t.Fatalf("Holds passed on a broken harness:\n%s", o.Log)
	}
	if want := "the thing breaks the rule: it holds (rule A)\n"; !strings.HasSuffix(o.Log, want) {
		t.Errorf("log = %q, want it to end with %q", o.Log, want)
	}
	if out["Serial"].Failed {
		t.Errorf("Serial failed:\n%s", out["Serial"].Log)
	}
	s.Caught(t, out, "broken", []string{"Holds"})
}

func TestRecordRunsWhatTheHarnessQualifiesFor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		h    *harness
		cfg  *RecordConfig
		want []string
	}{
		{"InOrder", &harness{}, nil, []string{"Holds", "Serial"}},
		{"Full", &harness{full: true}, &RecordConfig{Timeout: time.Minute}, []string{"Holds", "NeedsFull", "Serial"}},
		// Serial cases first, then the others at once, as Run does.
		{"Parallel", &harness{}, &RecordConfig{Parallel: true}, []string{"Serial", "Holds"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := testSuite().Record(t, tt.h, tt.cfg)
			if len(out) != len(tt.want) {
				t.Errorf("%d cases recorded, want %d", len(out), len(tt.want))
			}
			if got := strings.Join(tt.h.ran, ","); got != strings.Join(tt.want, ",") {
				t.Errorf("ran %s, want %s", got, strings.Join(tt.want, ","))
			}
		})
	}
}

func TestRun(t *testing.T) {
	h := &harness{}
	t.Run("Suite", func(t *testing.T) { testSuite().Run(t, h) })
	if got, want := strings.Join(h.ran, ","), "Serial,Holds"; got != want {
		t.Errorf("ran %s, want %s (serial cases first, the others in parallel after)", got, want)
	}
}

func TestWellFormed(t *testing.T) {
	t.Parallel()
	run := func(testing.TB, *harness) {}
	s := &Suite[*harness]{Cases: []Case[*harness]{
		{Name: "A", Rule: "cites rule 1", Run: run},
		{Name: "A", Rule: "cites rule 2", Run: run},
		{Name: "B", Rule: "cites nothing", Run: run},
		{Name: "C", Rule: "cites rule 3"},
		{Name: "D", Run: run},
	}}
	rec := &recordingTB{TB: t}
	s.WellFormed(rec, "rule ")
	want := []string{
		`case "A": the name is empty or not unique`,
		`case B: the rule "cites nothing" cites none of ["rule "]`,
		`case C has no run`,
		`case D has no rule`,
	}
	if got := strings.Join(rec.errors, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("WellFormed reported\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

// recordingTB keeps the errors reported to it.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestCounter(t *testing.T) {
	t.Parallel()
	var c Counter
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { c.Add() })
	}
	wg.Wait()
	if got := c.Get(); got != 50 {
		t.Errorf("Get() = %d, want 50", got)
	}
	if got := c.Add(); got != 51 {
		t.Errorf("Add() = %d, want 51", got)
	}
}

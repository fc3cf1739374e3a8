package tbrecord

import (
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		check         func(testing.TB)
		failed, skip  bool
		log           string
		cleanupCalled bool
	}{
		{"Passes", func(tb testing.TB) { tb.Log("fine") }, false, false, "fine\n", false},
		{"Errorf", func(tb testing.TB) { tb.Errorf("bad %d", 1) }, true, false, "bad 1\n", false},
		{"Fatal", func(tb testing.TB) { tb.Fatal("stop"); tb.Error("not reached") }, true, false, "stop\n", false},
		{"Skip", func(tb testing.TB) { tb.Skip("later") }, false, true, "later\n", false},
		{"Panic", func(tb testing.TB) { panic("boom") }, true, false, "panic: boom\n", false},
		{"Cleanup", func(tb testing.TB) { tb.Cleanup(func() {}) }, false, false, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			called := false
			check := tt.check
			if tt.cleanupCalled {
				check = func(tb testing.TB) { tb.Cleanup(func() { called = true }) }
			}
			o := Run(t, tt.name, 0, check)
			if o.Failed != tt.failed || o.Skipped != tt.skip || o.Log != tt.log || called != tt.cleanupCalled {
				t.Errorf("got %+v (cleanup %v), want failed=%v skipped=%v log=%q (cleanup %v)",
					o, called, tt.failed, tt.skip, tt.log, tt.cleanupCalled)
			}
		})
	}
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	defer close(block)
	o := Run(t, "hangs", 50*time.Millisecond, func(testing.TB) { <-block })
	if !o.Failed || !strings.Contains(o.Log, "did not end within") {
		t.Errorf("got %+v, want a failure for the timeout", o)
	}
}

func TestCaught(t *testing.T) {
	t.Parallel()
	rule := func(name string) string { return "rule of " + name }
	out := map[string]Outcome{
		"Stated":   {Failed: true, Log: "the thing breaks the rule: rule of Stated\n"},
		"Unstated": {Failed: true, Log: "something went wrong\n"},
		"Passed":   {},
	}
	for _, tt := range []struct {
		caughtBy []string
		failed   bool
		log      string
	}{
		{[]string{"Stated"}, false, "failed cases: Stated, Unstated"},
		{[]string{"Stated", "Passed"}, true, "case Passed passed despite the defect d"},
		{[]string{"Unstated"}, true, "case Unstated failed without stating its rule"},
		{[]string{"Missing"}, true, "case Missing did not run"},
	} {
		o := Run(t, strings.Join(tt.caughtBy, "+"), 0, func(tb testing.TB) {
			Caught(tb, out, "d", tt.caughtBy, "the thing breaks the rule: ", rule)
		})
		if o.Failed != tt.failed || !strings.Contains(o.Log, tt.log) {
			t.Errorf("Caught(%v): failed=%v, log %q; want failed=%v and %q", tt.caughtBy, o.Failed, o.Log, tt.failed, tt.log)
		}
	}
}

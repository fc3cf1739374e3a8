package storetest

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is the testing.TB a case runs with when the suite itself is
// under test: it keeps the case's failures, skips and log to itself
// instead of failing the test that runs the suite, the way testing/fstest
// reports a broken file system as an error rather than a failed test.
//
// It embeds the running test only for what a case may borrow from it
// (TempDir, Context, …); every method that fails, skips, logs or
// registers a clean-up is its own.
type recorder struct {
	testing.TB
	name string

	mu       sync.Mutex
	failed   bool
	skipped  bool
	log      strings.Builder
	cleanups []func()
}

func (r *recorder) Name() string { return r.TB.Name() + "/" + r.name }
func (r *recorder) Helper()      {}

func (r *recorder) Log(args ...any) { r.logf("%s", fmt.Sprintln(args...)) }
func (r *recorder) Logf(format string, args ...any) {
	r.logf(format, args...)
}

func (r *recorder) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.WriteString(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n"))
	r.log.WriteByte('\n')
}

func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) FailNow() {
	r.Fail()
	runtime.Goexit()
}

func (r *recorder) Error(args ...any) { r.Log(args...); r.Fail() }
func (r *recorder) Errorf(format string, args ...any) {
	r.logf(format, args...)
	r.Fail()
}
func (r *recorder) Fatal(args ...any) { r.Log(args...); r.FailNow() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.logf(format, args...)
	r.FailNow()
}

func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) { r.Log(args...); r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any) {
	r.logf(format, args...)
	r.SkipNow()
}

func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// caseTimeout bounds one case run under a recorder: a store broken so
// that a case waits for ever fails it instead of hanging the test.
const caseTimeout = 2 * time.Minute

// outcome is what became of one case under a recorder.
type outcome struct {
	failed, skipped bool
	log             string
}

// runSuite runs every case of the suite that h's store qualifies for, one
// after the other, each under a recorder, and returns their outcomes by
// case name.
func runSuite(t *testing.T, h Harness) map[string]outcome {
	t.Helper()
	if err := h.validate(); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]outcome)
	for _, c := range suite {
		if c.persistent && !h.Persistent {
			continue
		}
		r := &recorder{TB: t, name: c.name}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if p := recover(); p != nil {
					r.Errorf("panic: %v", p)
				}
			}()
			c.check(r, &h)
		}()
		select {
		case <-done:
		case <-time.After(caseTimeout):
			r.Errorf("the case did not end within %s", caseTimeout)
		}
		r.mu.Lock()
		cleanups := slices.Clone(r.cleanups)
		r.mu.Unlock()
		for _, f := range slices.Backward(cleanups) {
			f()
		}
		r.mu.Lock()
		out[c.name] = outcome{failed: r.failed, skipped: r.skipped, log: r.log.String()}
		r.mu.Unlock()
	}
	return out
}

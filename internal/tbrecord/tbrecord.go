// Package tbrecord runs one case of a conformance suite under a testing.TB
// that records its failures instead of failing the running test, so that a
// suite's own tests can check that it catches a broken implementation, the
// way testing/fstest reports a broken file system as an error. The suites
// (storetest, leasetest, inbox/inboxtest, window/windowtest) use it in
// their tests, through internal/conformance.
package tbrecord

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Outcome is how one case ended.
type Outcome struct {
	Failed, Skipped bool
	// Log is what the case logged, failures included, one line per call.
	Log string
}

// Run runs check under a recorder named t.Name()+"/"+name, waits for it to
// end (a failure past timeout when timeout is positive, so that a case
// that would wait for ever against a broken implementation fails instead
// of hanging the test), runs the clean-ups it registered, and returns how
// it ended. A panic in check is a failure.
func Run(t testing.TB, name string, timeout time.Duration, check func(testing.TB)) Outcome {
	r := &recorder{TB: t, name: name}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				r.Errorf("panic: %v", p)
			}
		}()
		check(r)
	}()
	if timeout > 0 {
		select {
		case <-done:
		case <-time.After(timeout):
			r.Errorf("the case did not end within %s", timeout)
		}
	} else {
		<-done
	}
	r.mu.Lock()
	cleanups := slices.Clone(r.cleanups)
	r.mu.Unlock()
	for _, f := range slices.Backward(cleanups) {
		f()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return Outcome{Failed: r.failed, Skipped: r.skipped, Log: r.log.String()}
}

// recorder embeds the running test only for what a case may borrow from it
// (TempDir, Context, …); every method that fails, skips, logs or registers
// a clean-up is its own.
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

func (r *recorder) Log(args ...any) { r.Logf("%s", fmt.Sprintln(args...)) }
func (r *recorder) Logf(format string, args ...any) {
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

func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorder) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *recorder) Fatal(args ...any)                 { r.Log(args...); r.FailNow() }
func (r *recorder) Fatalf(format string, args ...any) { r.Logf(format, args...); r.FailNow() }

func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any)                 { r.Log(args...); r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any) { r.Logf(format, args...); r.SkipNow() }
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

// Setenv and Chdir change the whole process: not for a recorded case.
func (r *recorder) Setenv(string, string) { panic("tbrecord: Setenv in a recorded case") }
func (r *recorder) Chdir(string)          { panic("tbrecord: Chdir in a recorded case") }

// Caught checks a suite's run against an implementation with a known
// defect: each case named in caughtBy must have run and failed, and its log
// must state its rule, as statement followed by rule(name). It logs the
// cases that failed.
func Caught(t testing.TB, out map[string]Outcome, defect string, caughtBy []string, statement string, rule func(name string) string) {
	t.Helper()
	for _, name := range caughtBy {
		o, ok := out[name]
		switch {
		case !ok:
			t.Errorf("case %s did not run", name)
		case !o.Failed:
			t.Errorf("case %s passed despite the defect %s (skipped=%v)\n%s", name, defect, o.Skipped, o.Log)
		case !strings.Contains(o.Log, statement+rule(name)):
			t.Errorf("case %s failed without stating its rule:\n%s", name, o.Log)
		}
	}
	t.Logf("failed cases: %s", strings.Join(FailedCases(out), ", "))
}

// FailedCases returns the names of the cases that failed, sorted.
func FailedCases(out map[string]Outcome) []string {
	var names []string
	for name, o := range out {
		if o.Failed {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

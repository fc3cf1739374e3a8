package inboxtest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// recorder is the testing.TB a case runs with when the suite itself is
// under test: it keeps the case's failures, skips and log to itself
// instead of failing the test that runs the suite. It embeds the running
// test only for what a case may borrow from it (TempDir, Context, …).
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
	r.log.WriteString(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n") + "\n")
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

func (r *recorder) FailNow()                       { r.Fail(); runtime.Goexit() }
func (r *recorder) Error(args ...any)              { r.Log(args...); r.Fail() }
func (r *recorder) Errorf(format string, a ...any) { r.Logf(format, a...); r.Fail() }
func (r *recorder) Fatal(args ...any)              { r.Log(args...); r.FailNow() }
func (r *recorder) Fatalf(format string, a ...any) { r.Logf(format, a...); r.FailNow() }
func (r *recorder) Skip(args ...any)               { r.Log(args...); r.SkipNow() }
func (r *recorder) Skipf(format string, a ...any)  { r.Logf(format, a...); r.SkipNow() }
func (r *recorder) Cleanup(f func())               { r.mu.Lock(); r.cleanups = append(r.cleanups, f); r.mu.Unlock() }
func (r *recorder) Skipped() bool                  { r.mu.Lock(); defer r.mu.Unlock(); return r.skipped }
func (r *recorder) Setenv(string, string)          { panic("inboxtest: Setenv in a recorded case") }
func (r *recorder) Chdir(string)                   { panic("inboxtest: Chdir in a recorded case") }
func (r *recorder) SkipNow()                       { r.mu.Lock(); r.skipped = true; r.mu.Unlock(); runtime.Goexit() }
func (r *recorder) output() string                 { r.mu.Lock(); defer r.mu.Unlock(); return r.log.String() }
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// runSuite runs every case that does not need a persistent store against
// h, each with a recorder, and returns the recorders by case name.
func runSuite(t *testing.T, h Harness) map[string]*recorder {
	out := map[string]*recorder{}
	for _, c := range suite {
		if c.persistent {
			continue
		}
		r := &recorder{TB: t, name: c.name}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.check(r, &h)
		}()
		<-done
		r.runCleanups()
		out[c.name] = r
	}
	return out
}

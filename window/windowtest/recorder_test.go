package windowtest

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recorder is the testing.TB a case runs with when the suite itself is
// under test: it keeps the case's failures and log instead of failing the
// test that runs the suite. It borrows from the running test only what
// does not report (Context, TempDir, …).
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

func (r *recorder) Log(args ...any)                 { r.logf("%s", fmt.Sprintln(args...)) }
func (r *recorder) Logf(format string, args ...any) { r.logf(format, args...) }

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

func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *recorder) Errorf(format string, args ...any) { r.logf(format, args...); r.Fail() }
func (r *recorder) Fatal(args ...any)                 { r.Log(args...); r.FailNow() }
func (r *recorder) Fatalf(format string, args ...any) { r.logf(format, args...); r.FailNow() }

func (r *recorder) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any)                 { r.Log(args...); r.SkipNow() }
func (r *recorder) Skipf(format string, args ...any) { r.logf(format, args...); r.SkipNow() }
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

func (r *recorder) runCleanups() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}

// outcome is how one case ended under a recorder.
type outcome struct {
	failed, skipped bool
	log             string
}

// runSuite runs every case against h, each under its own recorder, in
// parallel, and returns how each ended, by name.
func runSuite(t *testing.T, h Harness) map[string]outcome {
	t.Helper()
	out := make(map[string]outcome, len(suite))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range suite {
		if c.exactOnly && !h.Exact {
			continue
		}
		wg.Go(func() {
			r := &recorder{TB: t, name: c.name}
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.check(r, &h)
			}()
			<-done
			r.runCleanups()
			mu.Lock()
			defer mu.Unlock()
			out[c.name] = outcome{failed: r.Failed(), skipped: r.Skipped(), log: r.log.String()}
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

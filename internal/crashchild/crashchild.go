// Package crashchild runs the running test binary again as a child process
// and kills it with SIGKILL at a point it reports: the crash cases of the
// conformance suites (storetest, leasetest, inbox/inboxtest) use it to
// leave a store as a process that died mid-work leaves it. Kill is the
// parent's side; Ready and Fail are the child's.
package crashchild

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

const (
	// readyWait bounds how long the child may take to reach its point.
	readyWait = 60 * time.Second
	// killWait bounds how long a ready child waits to be killed.
	killWait = 10 * time.Minute
)

// Kill runs the test binary with -test.run naming t's top-level test and
// env added to its environment, waits until the child prints a line that
// contains ready on its standard output, then kills it with SIGKILL and
// reaps it. The child's standard error goes to the test's. It fails t if
// the child ends, or has not printed ready within a minute, first.
func Kill(t testing.TB, env []string, ready string) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(top)+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reached := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), ready) {
				reached <- nil
				return
			}
		}
		reached <- fmt.Errorf("the child exited before it was ready (%q): %v", ready, sc.Err())
	}()
	select {
	case err := <-reached:
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal(err)
		}
	case <-time.After(readyWait):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the child was not ready (%q) within %s", ready, readyWait)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// Ready is the child's side at its point: it prints ready on standard
// output, for Kill to read, and waits to be killed. A child not killed
// within ten minutes fails (see Fail).
func Ready(who, ready string) {
	fmt.Println(ready)
	time.Sleep(killWait) // the parent kills the process long before
	Fail(who, "not killed")
}

// Fail is the child's side when it cannot reach its point: it prints who,
// "child:" and args on standard error, which goes to the parent test's,
// and exits with status 3.
func Fail(who string, args ...any) {
	fmt.Fprintln(os.Stderr, append([]any{who + " child:"}, args...)...)
	os.Exit(3)
}

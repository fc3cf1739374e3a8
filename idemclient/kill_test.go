package idemclient_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemclient"
)

// Environment of the child role of TestKillResume.
const (
	killChildDirEnv = "IDEMCLIENT_KILL_CHILD_DIR"
	killChildURLEnv = "IDEMCLIENT_KILL_CHILD_URL"
)

// TestKillChildProcess is the child of TestKillResume, run in its own
// process: it journals one intent and starts carrying it out against a
// server that never answers, until the parent kills it.
func TestKillChildProcess(t *testing.T) {
	dir := os.Getenv(killChildDirEnv)
	if dir == "" {
		t.Skip("the child role of TestKillResume; it runs only in a process that test starts")
	}
	j, err := idemclient.OpenDirJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := idemclient.New(&idemclient.Config{Journal: j, AttemptTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.NewIntent(http.MethodPost, os.Getenv(killChildURLEnv)+"/transfers", []byte(`{"amount":100}`))
	if err != nil {
		t.Fatal(err)
	}
	in.Header.Set("Content-Type", "application/json")
	in.Header.Set("X-Intent", "killed")
	res, err := c.Do(context.Background(), in)
	t.Fatalf("Do returned %v, %v; the parent should have killed this process first", res, err)
}

// TestKillResume checks rule C3 across a real crash: a client process is
// killed with SIGKILL in the middle of an intent, either after the server
// committed the effect (the answer is lost) or before it did anything; a new
// client resumes the intent from the journal with the same key, and the
// effect is applied exactly once.
func TestKillResume(t *testing.T) {
	if os.Getenv(killChildDirEnv) != "" {
		t.Skip("parent role; this is the child")
	}
	t.Parallel()
	for _, tt := range []struct {
		name         string
		commitFirst  bool
		wantReplayed bool
	}{
		{"AfterCommit", true, true},
		{"BeforeCommit", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newCountingStore()
			service := newIdemHandler(t, store)
			var holding, held atomic.Bool
			holding.Store(true)
			seen := make(chan string, 1)
			keys := make(chan string, 100)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				key, err := idem.ParseKey(r.Header.Get("Idempotency-Key"))
				if err != nil {
					t.Errorf("bad key header %q: %v", r.Header.Get("Idempotency-Key"), err)
				}
				if holding.Load() && held.CompareAndSwap(false, true) {
					// Read the body, so that the server notices when the
					// client's connection goes away.
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					if tt.commitFirst {
						service.ServeHTTP(httptest.NewRecorder(), r)
					}
					seen <- key
					waitGone(r) // the client dies with the request open
					return
				}
				keys <- key
				service.ServeHTTP(w, r)
			}))
			defer srv.Close()

			dir := t.TempDir()
			var out bytes.Buffer
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillChildProcess$", "-test.v")
			cmd.Env = append(os.Environ(), killChildDirEnv+"="+dir, killChildURLEnv+"="+srv.URL)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var firstKey string
			select {
			case firstKey = <-seen:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the child's request never arrived; its output:\n%s", out.String())
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
				t.Fatal(err)
			}
			if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != -1 {
				t.Fatalf("child: got %v (exit code %d), want death by signal; output:\n%s", err, cmd.ProcessState.ExitCode(), out.String())
			}
			holding.Store(false)

			// "Restart": a new client over the same journal directory.
			j, err := idemclient.OpenDirJournal(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := pendingKeys(t, j); len(got) != 1 || got[0] != firstKey {
				t.Fatalf("pending after the kill: got %q, want [%q]", got, firstKey)
			}
			c, err := idemclient.New(&idemclient.Config{
				HTTPClient: srv.Client(),
				Journal:    j,
				BaseDelay:  time.Millisecond,
				MaxDelay:   20 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			outs, err := c.Resume(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != 1 || outs[0].Err != nil {
				t.Fatalf("Resume: got %+v, want one successful outcome", outs)
			}
			res := outs[0].Response
			if got, want := res.Status, http.StatusCreated; got != want {
				t.Errorf("status: got %d, want %d", got, want)
			}
			if got, want := res.Replayed, tt.wantReplayed; got != want {
				t.Errorf("replayed: got %v, want %v", got, want)
			}
			if got, want := store.Applied("killed"), 1; got != want {
				t.Errorf("effect committed %d times, want %d", got, want)
			}
			close(keys)
			for k := range keys {
				if k != firstKey {
					t.Errorf("resumed attempt carried key %q, want the journaled %q", k, firstKey)
				}
			}
			if got := pendingKeys(t, j); len(got) != 0 {
				t.Errorf("pending after Resume: got %q, want none", got)
			}
		})
	}
}

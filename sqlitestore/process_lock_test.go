package sqlitestore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// The child side of the cross-process tests: the test binary re-executed
// with childEnv set to "<role> <path>". It prints one line starting with
// childPrefix and exits.
const (
	childEnv    = "IDEM_SQLITESTORE_CHILD"
	childPrefix = "sqlitestore child: "
)

func runChild(role, path string) {
	ctx := context.Background()
	say := func(format string, args ...any) { fmt.Printf(childPrefix+format+"\n", args...) }
	switch role {
	case "open", "open-skip-migrate": // open for writing, report, close
		var cfg *sqlitestore.Config
		if role == "open-skip-migrate" {
			cfg = &sqlitestore.Config{SkipMigrate: true}
		}
		s, err := sqlitestore.Open(ctx, path, cfg)
		switch {
		case errors.Is(err, sqlitestore.ErrLocked):
			say("locked %v", err)
		case err != nil:
			say("error %v", err)
		default:
			say("opened")
			s.Close()
		}
	case "hold": // open for writing, record the key "c" and wait to be killed
		s, err := sqlitestore.Open(ctx, path, nil)
		if err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		g, err := idem.New(s, nil)
		if err == nil {
			_, _, err = g.Do(ctx, idem.Request{Scope: "s", Key: "c"}, func(context.Context) (idem.Result, error) {
				return idem.Result{Status: 202}, nil
			})
		}
		if err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		say("holding")
		time.Sleep(10 * time.Minute)
	case "inspect": // open read-only, look the record "k" up, try to write
		s, err := sqlitestore.Open(ctx, path, &sqlitestore.Config{ReadOnly: true})
		if err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"})
		if err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		_, _, err = s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "other", Now: time.Now()})
		say("found %d; begin read-only=%v", rec.Result.Status, errors.Is(err, sqlitestore.ErrReadOnly))
	default:
		say("error unknown role %q", role)
	}
	os.Exit(0)
}

// startChild runs this test in a child process in role on path and
// returns it with the first line it printed, without the prefix.
func startChild(t *testing.T, role, path string) (*exec.Cmd, string) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(top)+"$", "-test.count=1")
	// Under -race a process sleeps a second before exiting, unless told.
	cmd.Env = append(os.Environ(), childEnv+"="+role+" "+path,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), childPrefix); ok {
				line <- s
				return
			}
		}
		line <- "exited without a word"
	}()
	select {
	case s := <-line:
		return cmd, s
	case <-time.After(60 * time.Second):
		t.Fatalf("child %s: no answer within 60s", role)
		return nil, ""
	}
}

// runChildOnce runs a child to its end and returns what it said.
func runChildOnce(t *testing.T, role, path string) string {
	t.Helper()
	cmd, said := startChild(t, role, path)
	_ = cmd.Wait()
	return said
}

// One writing process per file: a second process's Open is refused with
// ErrLocked, naming the file and the holder, instead of starting and then
// waiting on SQLite's lock (a duplicate's work would run and be rolled
// back, a slow one would end in 503, and its migration could fail). A
// read-only open (idem inspect) still works beside the writer. Close and a
// SIGKILL both release the file, so a killed server never blocks its
// restart.
func TestOneWritingProcessPerFile(t *testing.T) {
	if v := os.Getenv(childEnv); v != "" {
		role, path, _ := strings.Cut(v, " ")
		runChild(role, path)
	}
	ctx := context.Background()
	s, path := setup(t)
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k"}, func(context.Context) (idem.Result, error) {
		return idem.Result{Status: 201}, nil
	}); err != nil {
		t.Fatal(err)
	}

	t.Run("SecondWriterRefused", func(t *testing.T) {
		said := runChildOnce(t, "open", path)
		if !strings.HasPrefix(said, "locked ") {
			t.Fatalf("second process's Open: %q, want ErrLocked", said)
		}
		for _, want := range []string{path, "process " + strconv.Itoa(os.Getpid())} {
			if !strings.Contains(said, want) {
				t.Errorf("error %q does not name %q", said, want)
			}
		}
	})
	t.Run("SweeperRefused", func(t *testing.T) {
		if said := runChildOnce(t, "open-skip-migrate", path); !strings.HasPrefix(said, "locked ") {
			t.Errorf("second process's Open with SkipMigrate: %q, want ErrLocked", said)
		}
	})
	t.Run("ReaderBesideTheWriter", func(t *testing.T) {
		if said := runChildOnce(t, "inspect", path); said != "found 201; begin read-only=true" {
			t.Errorf("read-only process: %q, want the record found and Begin refused with ErrReadOnly", said)
		}
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("FreeAfterClose", func(t *testing.T) {
		if said := runChildOnce(t, "open", path); said != "opened" {
			t.Errorf("Open after the holder closed: %q, want opened", said)
		}
	})
	t.Run("FreeAfterSIGKILL", func(t *testing.T) {
		child, said := startChild(t, "hold", path)
		if said != "holding" {
			t.Fatalf("child: %q", said)
		}
		_, err := sqlitestore.Open(ctx, path, nil)
		if !errors.Is(err, sqlitestore.ErrLocked) {
			t.Fatalf("Open while another process holds the file: %v, want ErrLocked", err)
		}
		if want := "process " + strconv.Itoa(child.Process.Pid); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name the holder (%s)", err, want)
		}
		if err := child.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		_ = child.Wait()
		// What the killed process committed is read from its WAL, by a
		// reader and by the restarted writer.
		r, err := sqlitestore.Open(ctx, path, &sqlitestore.Config{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only Open after the holder was killed: %v", err)
		}
		defer r.Close()
		if rec, err := r.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "c"}); err != nil || rec.Result.Status != 202 {
			t.Errorf("the killed process's record, read-only: %+v, %v", rec, err)
		}
		s, err := sqlitestore.Open(ctx, path, nil)
		if err != nil {
			t.Fatalf("Open after the holder was killed: %v", err)
		}
		defer s.Close()
		for key, status := range map[string]int{"k": 201, "c": 202} {
			if rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: key}); err != nil || rec.Result.Status != status {
				t.Errorf("record %s after the restart: %+v, %v", key, rec, err)
			}
		}
	})
}

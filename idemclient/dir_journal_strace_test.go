package idemclient_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/idemclient"
)

// straceChildDirEnv names the directory the child role of
// TestOpenDirJournalFsyncStrace opens a journal in.
const straceChildDirEnv = "IDEMCLIENT_STRACE_CHILD_DIR"

// TestStraceChildProcess is the child of TestOpenDirJournalFsyncStrace: it
// opens a journal in a directory that does not exist yet and saves one
// intent, under strace.
func TestStraceChildProcess(t *testing.T) {
	dir := os.Getenv(straceChildDirEnv)
	if dir == "" {
		t.Skip("the child role of TestOpenDirJournalFsyncStrace; it runs only in a process that test starts")
	}
	j, err := idemclient.OpenDirJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Save(context.Background(), testIntent("k", time.Now())); err != nil {
		t.Fatal(err)
	}
}

// TestOpenDirJournalFsyncStrace checks the durability of a new journal
// directory on the real system calls: it runs OpenDirJournal and one Save
// in a child process under strace and requires that every directory the
// child created (mkdirat) had its parent opened and fsynced afterwards,
// and that the intent's directory was fsynced after the rename. It skips
// where strace is not installed or may not trace.
func TestOpenDirJournalFsyncStrace(t *testing.T) {
	if os.Getenv(straceChildDirEnv) != "" {
		t.Skip("parent role; this is the child")
	}
	t.Parallel()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed; TestOpenDirJournalSyncsParents checks the same through a hook")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "intents")
	out := filepath.Join(root, "trace")
	cmd := exec.Command(strace, "-f", "-o", out, "-e", "trace=mkdirat,openat,fsync,close,renameat",
		os.Args[0], "-test.run=^TestStraceChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), straceChildDirEnv+"="+dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		if _, serr := os.Stat(out); serr != nil || strings.Contains(string(b), "ptrace") {
			t.Skipf("strace cannot trace here: %v: %s", err, b)
		}
		t.Fatalf("child under strace: %v: %s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	calls := straceCalls(string(data))

	var made []string
	for i, c := range calls {
		m := reMkdir.FindStringSubmatch(c)
		if m == nil {
			continue
		}
		made = append(made, m[1])
		if !syncedAfter(calls[i+1:], filepath.Dir(m[1])) {
			t.Errorf("mkdirat %s: its parent was not opened and fsynced afterwards", m[1])
		}
	}
	want := []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b"), dir}
	if strings.Join(made, "\n") != strings.Join(want, "\n") {
		t.Errorf("directories created: got %q, want %q", made, want)
	}
	renamed := -1
	for i, c := range calls {
		if strings.HasPrefix(c, "renameat") && strings.Contains(c, `"`+dir+`/`) && strings.HasSuffix(c, "= 0") {
			renamed = i
		}
	}
	if renamed < 0 || !syncedAfter(calls[renamed+1:], dir) {
		t.Errorf("Save: no rename into %s followed by an fsync of it", dir)
	}
}

var (
	reMkdir = regexp.MustCompile(`^mkdirat\(AT_FDCWD, "([^"]+)", 0700\) = 0$`)
	reOpen  = regexp.MustCompile(`^openat\(AT_FDCWD, "([^"]+)", [^)]*\) = (\d+)$`)
	// strace pads the result column with spaces.
	reSpaceEq = regexp.MustCompile(`\s+=`)
)

// syncedAfter reports whether calls open dir and fsync that descriptor
// successfully before closing it.
func syncedAfter(calls []string, dir string) bool {
	for i, c := range calls {
		m := reOpen.FindStringSubmatch(c)
		if m == nil || m[1] != dir {
			continue
		}
		for _, d := range calls[i+1:] {
			if d == "fsync("+m[2]+") = 0" {
				return true
			}
			if strings.HasPrefix(d, "close("+m[2]+")") {
				break
			}
		}
	}
	return false
}

// straceCalls returns the system calls of an strace -f log in the order
// they finished, without pids, joining calls that strace split in two
// ("<unfinished ...>" and "<... name resumed>").
func straceCalls(log string) []string {
	var calls []string
	open := make(map[string]string) // pid -> start of an unfinished call
	for line := range strings.SplitSeq(log, "\n") {
		pid, call, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		call = strings.TrimSpace(call)
		switch {
		case strings.HasSuffix(call, "<unfinished ...>"):
			open[pid] = strings.TrimSpace(strings.TrimSuffix(call, "<unfinished ...>"))
			continue
		case strings.HasPrefix(call, "<... "):
			_, rest, _ := strings.Cut(call, " resumed>")
			call = open[pid] + rest
			delete(open, pid)
		}
		calls = append(calls, reSpaceEq.ReplaceAllString(call, " ="))
	}
	return calls
}

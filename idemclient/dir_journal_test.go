package idemclient_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/idemclient"
)

func openJournal(t *testing.T) *idemclient.DirJournal {
	t.Helper()
	j, err := idemclient.OpenDirJournal(filepath.Join(t.TempDir(), "intents"))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func testIntent(key string, created time.Time) *idemclient.Intent {
	return &idemclient.Intent{
		Key:       key,
		Method:    http.MethodPost,
		URL:       "http://127.0.0.1:1/transfers",
		Header:    http.Header{"Content-Type": {"application/json"}},
		Body:      []byte(`{"amount":1}`),
		CreatedAt: created,
	}
}

func pendingKeys(t *testing.T, j idemclient.Journal) []string {
	t.Helper()
	ins, err := j.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, in := range ins {
		keys = append(keys, in.Key)
	}
	return keys
}

// TestDirJournalLifecycle checks the Journal contract: saved intents are
// pending (oldest first) until resolved, survive a reopen of the directory,
// and only resolved ones older than the cut-off are pruned.
func TestDirJournalLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openJournal(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, k := range []string{"c", "a", "b", `we"ird/../key`} {
		if err := j.Save(ctx, testIntent(k, t0.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := pendingKeys(t, j), []string{"c", "a", "b", `we"ird/../key`}; !slices.Equal(got, want) {
		t.Fatalf("pending: got %q, want %q", got, want)
	}
	ins, _ := j.Pending(ctx)
	if got, want := ins[0], testIntent("c", t0); !intentEqual(got, want) {
		t.Errorf("stored intent: got %+v, want %+v", got, want)
	}

	if err := j.MarkResolved(ctx, &idemclient.MarkResolvedParams{Key: "a", Status: 201, Now: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := j.MarkResolved(ctx, &idemclient.MarkResolvedParams{Key: "b", Status: 422, Now: t0.Add(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := j.MarkResolved(ctx, &idemclient.MarkResolvedParams{Key: "nope", Now: t0}); !errors.Is(err, idemclient.ErrNotFound) {
		t.Errorf("MarkResolved of an unknown key: got %v, want ErrNotFound", err)
	}

	reopened, err := idemclient.OpenDirJournal(j.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pendingKeys(t, reopened), []string{"c", `we"ird/../key`}; !slices.Equal(got, want) {
		t.Fatalf("pending after reopen: got %q, want %q", got, want)
	}

	n, err := reopened.Prune(ctx, &idemclient.PruneParams{Before: t0.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n, 1; got != want {
		t.Errorf("pruned: got %d, want %d", got, want)
	}
	// "b" is resolved but newer than the cut-off; pending ones never go.
	if got, want := countFiles(t, j.Dir()), 3; got != want {
		t.Errorf("files left: got %d, want %d", got, want)
	}
	n, err = reopened.Prune(ctx, &idemclient.PruneParams{Before: t0.Add(100 * time.Hour)})
	if err != nil || n != 1 {
		t.Errorf("second prune: got %d, %v; want 1, nil", n, err)
	}
	if got, want := pendingKeys(t, reopened), []string{"c", `we"ird/../key`}; !slices.Equal(got, want) {
		t.Fatalf("pending after prune: got %q, want %q", got, want)
	}

	// Saving a key again replaces it and makes it pending.
	if err := j.MarkResolved(ctx, &idemclient.MarkResolvedParams{Key: "c", Now: t0}); err != nil {
		t.Fatal(err)
	}
	again := testIntent("c", t0)
	again.Body = []byte(`{"amount":2}`)
	if err := j.Save(ctx, again); err != nil {
		t.Fatal(err)
	}
	ins, _ = j.Pending(ctx)
	if len(ins) != 2 || string(ins[0].Body) != `{"amount":2}` {
		t.Errorf("after re-save: got %d pending, first body %q; want 2 and the new body", len(ins), ins[0].Body)
	}
}

func intentEqual(a, b *idemclient.Intent) bool {
	return a.Key == b.Key && a.Method == b.Method && a.URL == b.URL && string(a.Body) == string(b.Body) &&
		a.CreatedAt.Equal(b.CreatedAt) && a.Header.Get("Content-Type") == b.Header.Get("Content-Type")
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestDirJournalLeftovers checks crash leftovers: a temporary file from a
// write that never finished is invisible to Pending and removed by Prune;
// an unreadable intent file is an error, never silently skipped.
func TestDirJournalLeftovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openJournal(t)
	if err := j.Save(ctx, testIntent("k", time.Now())); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(j.Dir(), ".tmp-123.json")
	if err := os.WriteFile(tmp, []byte(`{"version":1,"intent":{"ke`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := pendingKeys(t, j), []string{"k"}; !slices.Equal(got, want) {
		t.Fatalf("pending: got %q, want %q", got, want)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(tmp, old, old)
	if _, err := j.Prune(ctx, &idemclient.PruneParams{Before: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file after Prune: got %v, want it removed", err)
	}

	if err := os.WriteFile(filepath.Join(j.Dir(), "bad.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Pending(ctx); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("Pending with a corrupt file: got %v, want an error naming it", err)
	}
}

func TestDirJournalRejectsInvalidIntent(t *testing.T) {
	t.Parallel()
	j := openJournal(t)
	if err := j.Save(context.Background(), testIntent("", time.Now())); err == nil {
		t.Error("got nil, want an error for an empty key")
	}
	if _, err := idemclient.OpenDirJournal(""); err == nil {
		t.Error("OpenDirJournal(\"\"): got nil, want an error")
	}
}

// writeBadEntries puts two intent files Pending cannot read in j's
// directory: one corrupt, one of an unknown version. It returns their
// names.
func writeBadEntries(t *testing.T, j *idemclient.DirJournal) []string {
	t.Helper()
	files := map[string]string{
		"corrupt.json": `{"version":1,"intent":{"ke`,
		"future.json":  `{"version":99,"intent":{"key":"k","method":"POST","url":"http://x/"}}`,
	}
	var names []string
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(j.Dir(), name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// TestDirJournalPendingPartial checks that an unreadable intent file hides
// none of the others: Pending returns every readable pending intent with an
// error matching ErrUnreadableIntent that names each bad file, and Prune
// prunes around them and keeps them.
func TestDirJournalPendingPartial(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := openJournal(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, k := range []string{"a", "b", "c"} {
		if err := j.Save(ctx, testIntent(k, t0.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.MarkResolved(ctx, &idemclient.MarkResolvedParams{Key: "b", Status: 201, Now: t0}); err != nil {
		t.Fatal(err)
	}
	bad := writeBadEntries(t, j)

	ins, err := j.Pending(ctx)
	var keys []string
	for _, in := range ins {
		keys = append(keys, in.Key)
	}
	if want := []string{"a", "c"}; !slices.Equal(keys, want) {
		t.Errorf("pending: got %q, want %q", keys, want)
	}
	if !errors.Is(err, idemclient.ErrUnreadableIntent) {
		t.Fatalf("error: got %v, want ErrUnreadableIntent", err)
	}
	for _, name := range bad {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q: want it to name %s", err, name)
		}
	}

	n, err := j.Prune(ctx, &idemclient.PruneParams{Before: t0.Add(time.Hour)})
	if n != 1 || !errors.Is(err, idemclient.ErrUnreadableIntent) {
		t.Errorf("Prune: got %d, %v; want 1 and ErrUnreadableIntent", n, err)
	}
	for _, name := range bad {
		if _, err := os.Stat(filepath.Join(j.Dir(), name)); err != nil {
			t.Errorf("%s after Prune: %v, want it kept", name, err)
		}
	}
}

// TestOpenDirJournalCreatesParents checks that OpenDirJournal creates
// missing parents with mode 0700 and refuses a path that is a file.
func TestOpenDirJournalCreatesParents(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "intents")
	j, err := idemclient.OpenDirJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Save(context.Background(), testIntent("k", time.Now())); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b"), dir} {
		info, err := os.Stat(d)
		if err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: got %v, %v; want a directory with mode 0700", d, info, err)
		}
	}
	if _, err := idemclient.OpenDirJournal(dir); err != nil {
		t.Errorf("reopening: got %v, want nil", err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := idemclient.OpenDirJournal(filepath.Join(file, "intents")); err == nil {
		t.Error("under a file: got nil, want an error")
	}
	if _, err := idemclient.OpenDirJournal(file); err == nil {
		t.Error("a file: got nil, want an error")
	}
}

package idemclient

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestOpenDirJournalSyncsParents checks that every directory OpenDirJournal
// creates is made durable: the parent of each one is fsynced (through the
// syncDir hook, which sees the directories synced), outermost first, before
// OpenDirJournal returns; and a journal whose directory exists syncs
// nothing on open. It swaps a package variable, so it does not run in
// parallel.
func TestOpenDirJournalSyncsParents(t *testing.T) {
	root := t.TempDir()
	var synced []string
	testHookSyncDir = func(dir string) { synced = append(synced, dir) }
	t.Cleanup(func() { testHookSyncDir = nil })

	dir := filepath.Join(root, "a", "b", "intents")
	j, err := OpenDirJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if !slices.Equal(synced, want) {
		t.Errorf("synced on open: got %q, want %q", synced, want)
	}

	synced = nil
	if err := j.Save(context.Background(), &Intent{Key: "k", Method: "POST", URL: "http://127.0.0.1:1/", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if want := []string{dir}; !slices.Equal(synced, want) {
		t.Errorf("synced by Save: got %q, want %q", synced, want)
	}

	synced = nil
	if _, err := OpenDirJournal(dir); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 0 {
		t.Errorf("synced on reopen: got %q, want nothing", synced)
	}
}

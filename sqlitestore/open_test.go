package sqlitestore_test

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Recorded responses may hold what a client must not see of another's: a
// database Open creates is readable by its owner only, and so are the WAL
// and shared-memory files SQLite makes beside it (SQLite gives them the
// database's permissions) and the lock file.
func TestNewDatabaseIsPrivate(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions on Windows")
	}
	s, path := setup(t)
	ctx := context.Background()
	_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rec := &idem.Record{Scope: "s", Key: "k", State: idem.StateCompleted, ExpiresAt: time.Now().Add(time.Hour)}
	if err := tx.Commit(ctx, &idem.CommitParams{Record: rec, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm", path + "-lock"} {
		info, err := os.Stat(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %v, want no access for group and others", name, perm)
		}
	}
}

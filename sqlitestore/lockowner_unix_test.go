//go:build unix

package sqlitestore_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/idemkit/idem/sqlitestore"
)

// A tool run as root beside a service's database (idem sweep) must not
// leave a lock file the service's user cannot open: the lock file takes the
// database file's owner, group and permission bits, as SQLite's -wal and
// -shm files do, and one already left owned by root is handed back.
func TestLockFileBelongsToTheDatabaseOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to open as root a database another user owns")
	}
	const nobody = 65534
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.db")
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, name := range []string{path, path + "-lock"} {
		if err := os.Chmod(name, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func()
	}{
		{"NewLockFile", func() { _ = os.Remove(path + "-lock") }},
		{"RootOwnedLockFile", func() { _ = os.Chown(path+"-lock", 0, 0); _ = os.Chmod(path+"-lock", 0o600) }},
	} {
		tc.setup()
		s, err := sqlitestore.Open(context.Background(), path, &sqlitestore.Config{SkipMigrate: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		s.Close()
		info, err := os.Stat(path + "-lock")
		if err != nil {
			t.Fatal(err)
		}
		st := info.Sys().(*syscall.Stat_t)
		if st.Uid != nobody || st.Gid != nobody || info.Mode().Perm() != 0o640 {
			t.Errorf("%s: lock file owned by %d:%d mode %v, want %d:%d mode 0640 like the database",
				tc.name, st.Uid, st.Gid, info.Mode().Perm(), nobody, nobody)
		}
	}
}

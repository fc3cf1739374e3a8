package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// E3: the in-flight lock belongs to the file, not to the name it was opened
// by. The same file opened under two names in one process (a symlink, a
// symlinked directory, a hard link, a relative path) refuses a held key at
// once with ErrInFlight, instead of waiting out the busy timeout on
// SQLite's write lock and failing with 503.
func TestOneFileUnderTwoNamesSharesTheInFlightLock(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		alias func(t *testing.T, path string) string
	}{
		{"Symlink", func(t *testing.T, path string) string {
			link := filepath.Join(t.TempDir(), "link.db")
			if err := os.Symlink(path, link); err != nil {
				t.Skipf("no symlinks here: %v", err)
			}
			return link
		}},
		{"SymlinkedDirectory", func(t *testing.T, path string) string {
			dir := filepath.Join(t.TempDir(), "dir")
			if err := os.Symlink(filepath.Dir(path), dir); err != nil {
				t.Skipf("no symlinks here: %v", err)
			}
			return filepath.Join(dir, filepath.Base(path))
		}},
		{"HardLink", func(t *testing.T, path string) string {
			link := filepath.Join(filepath.Dir(path), "hard.db")
			if err := os.Link(path, link); err != nil {
				t.Skipf("no hard links here: %v", err)
			}
			return link
		}},
		{"Relative", func(t *testing.T, path string) string {
			wd, err := os.Getwd()
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(wd, path)
			if err != nil {
				t.Skipf("no relative path: %v", err)
			}
			return "." + string(filepath.Separator) + rel
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := &sqlitestore.Config{BusyTimeout: 100 * time.Millisecond}
			path := filepath.Join(t.TempDir(), "idem.db")
			a, err := sqlitestore.Open(ctx, path, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			alias := tt.alias(t, path)
			b, err := sqlitestore.Open(ctx, alias, cfg)
			if err != nil {
				t.Fatalf("second Open of the same file in this process: %v", err)
			}
			defer b.Close()

			p := &idem.BeginParams{Scope: "s", Key: "k", Now: time.Now()}
			_, tx, err := a.Begin(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			_, tx2, err := b.Begin(ctx, p)
			if tx2 != nil {
				_ = tx2.Rollback(ctx)
			}
			if !errors.Is(err, idem.ErrInFlight) {
				t.Errorf("Begin on the held key through the other name: err = %v, want ErrInFlight", err)
			}
			// What one name commits, the other reads: one database.
			rec := &idem.Record{Scope: "s", Key: "k", State: idem.StateCompleted, CreatedAt: p.Now, ExpiresAt: p.Now.Add(time.Hour)}
			if err := tx.Commit(ctx, &idem.CommitParams{Record: rec, Now: p.Now}); err != nil {
				t.Fatal(err)
			}
			if got, _, err := b.Begin(ctx, p); err != nil || got == nil {
				t.Errorf("Begin through the other name after the commit: %v, %v; want the record", got, err)
			}
			// Both names write through one WAL: SQLite names it after the
			// name it opened, and two WALs of one file would corrupt it.
			p2 := &idem.BeginParams{Scope: "s", Key: "k2", Now: p.Now}
			_, tx, err = b.Begin(ctx, p2)
			if err != nil {
				t.Fatal(err)
			}
			rec2 := *rec
			rec2.Key = "k2"
			if err := tx.Commit(ctx, &idem.CommitParams{Record: &rec2, Now: p.Now}); err != nil {
				t.Fatal(err)
			}
			w1, err1 := os.Stat(path + "-wal")
			w2, err2 := os.Stat(alias + "-wal")
			if err1 == nil && err2 == nil && !os.SameFile(w1, w2) {
				t.Errorf("two WAL files for one database: %s-wal and %s-wal", path, alias)
			}
		})
	}
}

package idemclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// DirJournal is a Journal that keeps one JSON file per intent in a
// directory. It is crash-safe for process crashes and power loss alike:
// every write goes to a temporary file in the same directory, which is
// fsynced, renamed over the intent's file and followed by an fsync of the
// directory. A rename is atomic, so a reader (or a restarted process) sees
// the old file or the new one, never a torn one; a leftover temporary file
// belongs to a write that never returned, and is ignored and later removed
// by Prune.
//
// File names are the SHA-256 of the key in hexadecimal, so any valid key
// maps to a safe name. A DirJournal is safe for concurrent use by the
// goroutines of one process. Two processes may share a directory (each write
// is still atomic), but then both may resume the same intent; that is safe,
// the server's idempotency sees to it, but it wastes attempts.
type DirJournal struct {
	dir string
	mu  sync.Mutex
}

var _ Journal = (*DirJournal)(nil)

const (
	journalVersion = 1
	journalExt     = ".json"
	journalTmp     = ".tmp-"
)

// journalEntry is the content of one file.
type journalEntry struct {
	Version    int        `json:"version"`
	Intent     *Intent    `json:"intent"`
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	Status     int        `json:"status,omitempty"`
}

// OpenDirJournal returns a DirJournal over dir, creating the directory and
// any missing parent (mode 0700: intents hold request bodies and headers)
// if needed. Each directory it creates is made durable by an fsync of its
// parent, so that a power loss cannot take away the directory, and every
// intent saved in it, after Save returned.
func OpenDirJournal(dir string) (*DirJournal, error) {
	if dir == "" {
		return nil, errors.New("idemclient: OpenDirJournal: dir is empty")
	}
	if err := mkdirDurable(filepath.Clean(dir)); err != nil {
		return nil, fmt.Errorf("idemclient: OpenDirJournal: %w", err)
	}
	return &DirJournal{dir: dir}, nil
}

// mkdirDurable creates dir and its missing parents, outermost first, and
// fsyncs the parent of each one it creates: a directory's entry lives in
// its parent, and only an fsync of the parent makes the entry durable.
func mkdirDurable(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case err == nil && info.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s is not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirDurable(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		// Another process may have created it since the Stat; its
		// entry may not be durable yet, so the parent is synced anyway.
		if info, serr := os.Stat(dir); serr != nil || !info.IsDir() {
			return err
		}
	}
	return syncDir(parent)
}

// Dir returns the journal's directory.
func (j *DirJournal) Dir() string { return j.dir }

func (j *DirJournal) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(j.dir, hex.EncodeToString(sum[:])+journalExt)
}

// Save implements Journal.
func (j *DirJournal) Save(ctx context.Context, in *Intent) error {
	if err := in.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.write(j.path(in.Key), &journalEntry{Version: journalVersion, Intent: in})
}

// Pending implements Journal. An intent file it cannot read (corrupt, of
// an unknown version, or refused by the file system) does not hide the
// others: Pending returns every intent it could read, together with an
// error matching ErrUnreadableIntent that names each file it could not.
func (j *DirJournal) Pending(ctx context.Context) ([]*Intent, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*Intent
	unreadable, err := j.each(ctx, func(_ string, e *journalEntry) error {
		if e.ResolvedAt == nil {
			out = append(out, e.Intent)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b *Intent) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, unreadable
}

// MarkResolved implements Journal.
func (j *DirJournal) MarkResolved(ctx context.Context, p *MarkResolvedParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	path := j.path(p.Key)
	e, err := j.read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, p.Key)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnreadableIntent, path, err)
	}
	at := p.Now
	e.ResolvedAt, e.Status = &at, p.Status
	return j.write(path, e)
}

// Prune implements Journal. It also removes temporary files left by writes
// that never finished and were last modified before p.Before. An intent
// file it cannot read is kept (it may be pending) and reported, as by
// Pending, after the others are pruned.
func (j *DirJournal) Prune(ctx context.Context, p *PruneParams) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	unreadable, err := j.each(ctx, func(path string, e *journalEntry) error {
		if e.ResolvedAt == nil || !e.ResolvedAt.Before(p.Before) {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("idemclient: journal: %w", err)
		}
		n++
		return nil
	})
	if err != nil {
		return n, err
	}
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return n, fmt.Errorf("idemclient: journal: %w", err)
	}
	for _, de := range ents {
		if !strings.HasPrefix(de.Name(), journalTmp) {
			continue
		}
		if info, err := de.Info(); err == nil && info.ModTime().Before(p.Before) {
			_ = os.Remove(filepath.Join(j.dir, de.Name()))
		}
	}
	if n > 0 {
		if err := syncDir(j.dir); err != nil {
			return n, err
		}
	}
	return n, unreadable
}

// each calls fn for every intent file it can read, in directory order. The
// files it cannot read are returned together as unreadable, each error
// matching ErrUnreadableIntent and naming its file; err, when not nil,
// means the walk stopped (the directory could not be listed, ctx is done,
// or fn failed).
func (j *DirJournal) each(ctx context.Context, fn func(path string, e *journalEntry) error) (unreadable, err error) {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("idemclient: journal: %w", err)
	}
	var bad []error
	for _, de := range ents {
		name := de.Name()
		if !de.Type().IsRegular() || !strings.HasSuffix(name, journalExt) || strings.HasPrefix(name, journalTmp) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		path := filepath.Join(j.dir, name)
		e, err := j.read(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned by another process in between
		}
		if err != nil {
			bad = append(bad, fmt.Errorf("%w: %s: %w", ErrUnreadableIntent, path, err))
			continue
		}
		if err := fn(path, e); err != nil {
			return nil, err
		}
	}
	return errors.Join(bad...), nil
}

func (j *DirJournal) read(path string) (*journalEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var e journalEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, err
	}
	if e.Version != journalVersion || e.Intent == nil {
		return nil, fmt.Errorf("unsupported version %d or no intent", e.Version)
	}
	return &e, nil
}

// write replaces path with e atomically and durably: temporary file, fsync,
// rename, fsync of the directory.
func (j *DirJournal) write(path string, e *journalEntry) (err error) {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("idemclient: journal: %w", err)
	}
	f, err := os.CreateTemp(j.dir, journalTmp+"*"+journalExt)
	if err != nil {
		return fmt.Errorf("idemclient: journal: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
			err = fmt.Errorf("idemclient: journal: %w", err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(j.dir)
}

// testHookSyncDir, when set by a test, is called with each directory
// syncDir is about to sync.
var testHookSyncDir func(dir string)

// syncDir makes the creation, rename or removal of an entry of dir
// durable.
func syncDir(dir string) error {
	if testHookSyncDir != nil {
		testHookSyncDir(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("idemclient: journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("idemclient: journal: syncing %s: %w", dir, err)
	}
	return nil
}

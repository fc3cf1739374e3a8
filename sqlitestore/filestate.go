package sqlitestore

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
)

type lockKey struct{ scope, key string }

// fileState is what every writing Store of one database file in this
// process shares: the process's lock on the file, the keys in flight and
// the writer slot. It is found by the file's identity (device and inode on
// Unix), so a symlink, a relative path or a hard link to an open file
// reaches the same state.
type fileState struct {
	path string      // the name SQLite and the lock file use: the first opener's, symlinks resolved
	info os.FileInfo // the file's identity, for os.SameFile
	lock io.Closer   // the process lock (see lockProcess); closing it releases the file
	refs int         // guarded by filesMu

	mu     sync.Mutex
	keys   map[lockKey]struct{}
	writer chan struct{}

	// lateCommits counts the COMMITs still going on after their caller's
	// deadline released their key.
	lateCommits atomic.Int32
}

var (
	filesMu sync.Mutex
	files   []*fileState
)

// acquireFile returns the state of the database file at path (absolute,
// symlinks resolved), taking the process lock when this process does not
// hold the file yet.
func acquireFile(path string) (*fileState, error) {
	filesMu.Lock()
	defer filesMu.Unlock()
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: Open: %w", err)
	}
	for _, f := range files {
		if os.SameFile(f.info, info) {
			f.refs++
			return f, nil
		}
	}
	lock, err := lockProcess(path, path+lockSuffix)
	if err != nil {
		return nil, err
	}
	f := &fileState{
		path:   path,
		info:   info,
		lock:   lock,
		refs:   1,
		keys:   map[lockKey]struct{}{},
		writer: make(chan struct{}, 1),
	}
	files = append(files, f)
	return f, nil
}

// release drops one reference; the last one releases the process lock.
func (f *fileState) release() {
	filesMu.Lock()
	defer filesMu.Unlock()
	if f.refs--; f.refs > 0 {
		return
	}
	for i, g := range files {
		if g == f {
			files = append(files[:i], files[i+1:]...)
			break
		}
	}
	_ = f.lock.Close()
}

// tryLock takes the key's in-flight lock without waiting.
func (f *fileState) tryLock(k lockKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, held := f.keys[k]; held {
		return false
	}
	f.keys[k] = struct{}{}
	return true
}

func (f *fileState) unlock(k lockKey) {
	f.mu.Lock()
	delete(f.keys, k)
	f.mu.Unlock()
}

// acquireWriter waits for the process's single writer slot, so that this
// process's writers queue in Go instead of polling SQLite's busy handler.
func (f *fileState) acquireWriter(ctx context.Context, timeout time.Duration) error {
	select {
	case f.writer <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f.writer <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sqlitestore: waiting for the writer: %w", ctx.Err())
	case <-t.C:
		return fmt.Errorf("%w: sqlitestore: no write slot within %s", idem.ErrUnavailable, timeout)
	}
}

func (f *fileState) releaseWriter() { <-f.writer }

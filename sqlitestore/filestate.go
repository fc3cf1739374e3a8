package sqlitestore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

type lockKey struct{ scope, key string }

// fileState is what every Store of one database file in this process
// shares: the keys in flight and the writer slot.
type fileState struct {
	refs   int
	mu     sync.Mutex
	keys   map[lockKey]struct{}
	writer chan struct{}
}

var (
	filesMu sync.Mutex
	files   = map[string]*fileState{}
)

func acquireFile(path string) *fileState {
	filesMu.Lock()
	defer filesMu.Unlock()
	f := files[path]
	if f == nil {
		f = &fileState{keys: map[lockKey]struct{}{}, writer: make(chan struct{}, 1)}
		files[path] = f
	}
	f.refs++
	return f
}

func releaseFile(path string) {
	filesMu.Lock()
	defer filesMu.Unlock()
	if f := files[path]; f != nil {
		if f.refs--; f.refs == 0 {
			delete(files, path)
		}
	}
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

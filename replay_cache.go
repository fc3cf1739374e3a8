package idem

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReplayCacheBytes is the default of Config.ReplayCacheBytes.
const DefaultReplayCacheBytes = 32 << 20

// replayEntryOverhead is what an entry costs beyond its strings and
// bytes: the map slot, the list element, the entry and the Result's
// fixed part, rounded up. It keeps a cache of tiny entries bounded too.
const replayEntryOverhead = 256

// slotKey addresses a record in the Guard's in-process tables: the stored
// scope and the key, as the store addresses it.
type slotKey struct{ scope, key string }

// replayCache holds recent completed records of one Guard, so that a retry
// is answered without a store call (docs/DESIGN.md#in-process). A completed record
// is final until it expires: it is never overwritten while live (Store,
// Tx.Commit), so a copy kept in memory stays right on any number of
// processes, as long as it is never served at or past its ExpiresAt.
//
// It is bounded by bytes and evicts the least recently used entries first.
type replayCache struct {
	max int64

	mu    sync.Mutex
	used  int64
	items map[slotKey]*list.Element // of *replayEntry
	lru   list.List                 // front: most recently used

	hits, misses atomic.Uint64
}

type replayEntry struct {
	k           slotKey
	fingerprint string
	res         Result
	expiresAt   time.Time
	size        int64
}

func newReplayCache(max int64) *replayCache {
	return &replayCache{max: max, items: make(map[slotKey]*list.Element)}
}

// get returns the cached record of k if it is live at now: its
// fingerprint and a copy of its result. An entry found expired is dropped.
// Every call counts as a hit or a miss.
func (c *replayCache) get(k slotKey, now time.Time) (fingerprint string, res Result, ok bool) {
	c.mu.Lock()
	el, found := c.items[k]
	if found {
		e := el.Value.(*replayEntry)
		if now.Before(e.expiresAt) {
			c.lru.MoveToFront(el)
			fingerprint, res = e.fingerprint, e.res
			c.mu.Unlock()
			c.hits.Add(1)
			return fingerprint, cloneResult(res), true
		}
		c.remove(el)
	}
	c.mu.Unlock()
	c.misses.Add(1)
	return "", Result{}, false
}

// put keeps a copy of rec, a completed record, unless it has expired at
// now or is larger than the whole cache.
func (c *replayCache) put(rec *Record, now time.Time) {
	if rec.State != StateCompleted || !now.Before(rec.ExpiresAt) {
		return
	}
	size := entrySize(rec)
	if size > c.max {
		return
	}
	e := &replayEntry{
		k:           slotKey{rec.Scope, rec.Key},
		fingerprint: rec.Fingerprint,
		res:         cloneResult(rec.Result),
		expiresAt:   rec.ExpiresAt,
		size:        size,
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.items[e.k]; ok {
		c.remove(old)
	}
	c.items[e.k] = c.lru.PushFront(e)
	c.used += size
	for c.used > c.max {
		c.remove(c.lru.Back())
	}
}

// remove drops el; c.mu is held.
func (c *replayCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*replayEntry)
	delete(c.items, e.k)
	c.used -= e.size
}

func (c *replayCache) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.used
}

// entrySize is what the cache counts for rec.
func entrySize(rec *Record) int64 {
	n := replayEntryOverhead + len(rec.Scope) + len(rec.Key) + len(rec.Fingerprint) + len(rec.Result.Body)
	for name, values := range rec.Result.Header {
		n += 48 + len(name) // the map slot and the slice header
		for _, v := range values {
			n += 16 + len(v)
		}
	}
	return int64(n)
}

// cloneResult returns a deep copy of r, so that neither the cache nor its
// callers see the other's later changes.
func cloneResult(r Result) Result {
	out := Result{Status: r.Status}
	if r.Body != nil {
		out.Body = append(make([]byte, 0, len(r.Body)), r.Body...)
	}
	if r.Header != nil {
		out.Header = make(map[string][]string, len(r.Header))
		for k, v := range r.Header {
			out.Header[k] = append([]string(nil), v...)
		}
	}
	return out
}

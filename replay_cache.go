package idem

import (
	"container/list"
	"encoding/binary"
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// DefaultReplayCacheBytes is the default of Config.ReplayCacheBytes.
const DefaultReplayCacheBytes = 32 << 20

// DefaultReplayCacheAge is the default of Config.ReplayCacheAge.
const DefaultReplayCacheAge = 5 * time.Second

// What the cache counts is what it keeps on the heap: each entry is one
// replayEntry, one list.Element and one string holding all its bytes
// (scope, key, fingerprint, body and the encoded header), each rounded up
// to the size the allocator gives it; and the map's slots. The test
// TestReplayCacheCountsWhatItHolds measures it against the heap.
//
// replayEntryFixed is an entry's cost beyond its bytes: the entry and its
// list element.
var replayEntryFixed = int64(allocSize(int(unsafe.Sizeof(replayEntry{}))) + allocSize(int(unsafe.Sizeof(list.Element{}))))

// mapSlotCost is what the cache counts for each entry of its map: three
// times the key and the value, since a Go map is between 7/16 and 7/8
// full (it doubles once full), has a control byte per slot, and its large
// tables are rounded up to whole pages. A Go map keeps what it grew to
// when entries are deleted, so the cache counts the most entries its map
// has held, not the entries it holds now (see maybeShrink).
const mapSlotCost = int64(3 * (unsafe.Sizeof(slotKey{}) + unsafe.Sizeof(uintptr(0))))

// shrinkMin is the fewest slots worth rebuilding the map for.
const shrinkMin = 64

// slotKey addresses a record in the Guard's in-process tables: the stored
// scope and the key, as the store addresses it.
type slotKey struct{ scope, key string }

// replayCache holds recent completed records of one Guard, so that a retry
// is answered without a store call (docs/DESIGN.md#in-process). A completed
// record is never overwritten while live (Store, Tx.Commit), so a copy kept
// in memory stays right on any number of processes, until the record
// expires or is taken from the store behind the Guard's back: forgotten by
// an operator (Admin.Forget), or lost with the last commits of a primary
// that failed over to an asynchronous standby. An entry is therefore served
// only before the record's ExpiresAt, for at most the Guard's
// ReplayCacheAge after it was read from or written to the store, and only
// in the epoch it was put in: the Guard starts a new epoch when its store
// fails (a failover is seen as failures first) and when it forgets a
// record itself.
//
// It is bounded by bytes, counted as the heap they take, and evicts the
// least recently used entries first.
type replayCache struct {
	max int64

	mu    sync.Mutex
	used  int64                     // the entries' sizes plus slots × mapSlotCost
	slots int                       // the most entries items has held since it was made
	items map[slotKey]*list.Element // of *replayEntry
	lru   list.List                 // front: most recently used

	hits, misses atomic.Uint64
}

// replayEntry is one cached record. Its strings all point into one
// allocation, which the entry alone holds: nothing of the record it was
// copied from is kept, and nothing of it is handed out by get.
type replayEntry struct {
	k           slotKey
	fingerprint string
	body        string // Result.Body
	header      string // Result.Header, encoded by writeHeader
	status      int
	hasBody     bool      // Body was not nil
	hasHeader   bool      // Header was not nil
	until       time.Time // served before: the record's ExpiresAt, or earlier
	epoch       uint64    // the Guard's epoch when the entry was put
	size        int64
}

func newReplayCache(max int64) *replayCache {
	return &replayCache{max: max, items: make(map[slotKey]*list.Element)}
}

// get returns the cached record of k if it may be served at now in epoch:
// its fingerprint and a copy of its result. An entry found too old, or of
// an earlier epoch, is dropped. Every call counts as a hit or a miss.
func (c *replayCache) get(k slotKey, now time.Time, epoch uint64) (fingerprint string, res Result, ok bool) {
	c.mu.Lock()
	el, found := c.items[k]
	if found {
		e := el.Value.(*replayEntry)
		if now.Before(e.until) && e.epoch == epoch {
			c.lru.MoveToFront(el)
			c.mu.Unlock()
			c.hits.Add(1)
			return e.fingerprint, e.result(), true
		}
		c.remove(el)
		c.maybeShrink()
	}
	c.mu.Unlock()
	c.misses.Add(1)
	return "", Result{}, false
}

// put keeps a copy of rec, a completed record read from or written to the
// store in epoch by a call that began at now, to be served until now+age
// at the latest, unless it has expired at now or is larger than the whole
// cache.
func (c *replayCache) put(rec *Record, now time.Time, age time.Duration, epoch uint64) {
	if rec.State != StateCompleted || !now.Before(rec.ExpiresAt) {
		return
	}
	n := entryBytes(rec)
	if n+replayEntryFixed+mapSlotCost > c.max {
		return // too large: not even worth copying
	}
	e := newReplayEntry(rec, n)
	if e.size+mapSlotCost > c.max {
		return
	}
	if until := now.Add(age); until.Before(e.until) {
		e.until = until
	}
	e.epoch = epoch
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.items[e.k]; ok {
		c.remove(old)
	}
	c.items[e.k] = c.lru.PushFront(e)
	c.used += e.size
	if len(c.items) > c.slots {
		c.slots = len(c.items)
		c.used += mapSlotCost
	}
	for c.used > c.max && c.lru.Len() > 0 {
		c.remove(c.lru.Back())
	}
	c.maybeShrink()
}

// remove drops el; c.mu is held.
func (c *replayCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*replayEntry)
	delete(c.items, e.k)
	c.used -= e.size
}

// maybeShrink rebuilds the map once it holds under a quarter of the
// most entries it has held (or, for a map of a few slots, once their
// count alone is over the bound), so that the memory it grew to is given
// back and no longer counted. The copy costs one insertion per entry
// left, paid for by the three times as many removals before it. c.mu is
// held.
func (c *replayCache) maybeShrink() {
	if 4*len(c.items) >= c.slots || (c.slots < shrinkMin && c.used <= c.max) {
		return
	}
	items := make(map[slotKey]*list.Element, len(c.items))
	for k, el := range c.items {
		items[k] = el
	}
	c.items = items
	c.used -= int64(c.slots-len(items)) * mapSlotCost
	c.slots = len(items)
}

func (c *replayCache) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.used
}

// entryBytes is the length of the one string an entry of rec keeps.
func entryBytes(rec *Record) int64 {
	return int64(len(rec.Scope) + len(rec.Key) + len(rec.Fingerprint) + len(rec.Result.Body) + headerLen(rec.Result.Header))
}

// newReplayEntry copies rec into an entry whose bytes are one string, of
// n bytes (entryBytes), and sizes it: the entry, its list element, and the
// string's allocation.
func newReplayEntry(rec *Record, n int64) *replayEntry {
	r := &rec.Result
	var b strings.Builder
	b.Grow(int(n))
	b.WriteString(rec.Scope)
	b.WriteString(rec.Key)
	b.WriteString(rec.Fingerprint)
	b.Write(r.Body)
	if r.Header != nil {
		writeHeader(&b, r.Header)
	}
	data := b.String()
	i := 0
	next := func(n int) string {
		s := data[i : i+n]
		i += n
		return s
	}
	e := &replayEntry{
		k:           slotKey{next(len(rec.Scope)), next(len(rec.Key))},
		fingerprint: next(len(rec.Fingerprint)),
		body:        next(len(r.Body)),
		status:      r.Status,
		hasBody:     r.Body != nil,
		hasHeader:   r.Header != nil,
		until:       rec.ExpiresAt,
	}
	e.header = data[i:]
	// Cap is the allocation's size: the builder asks for exactly what
	// Grow was given, and the allocator rounds it up to a size class.
	e.size = replayEntryFixed + int64(max(b.Cap(), len(data)))
	return e
}

// result returns a copy of the entry's result that shares no memory with
// the cache: one allocation for the body, and one for the header's text.
func (e *replayEntry) result() Result {
	res := Result{Status: e.status}
	if e.hasBody {
		res.Body = []byte(e.body)
	}
	if e.hasHeader {
		res.Header = decodeHeader(strings.Clone(e.header))
	}
	return res
}

// The header is encoded as uvarint(names), then for each name
// uvarint(len) name uvarint(values), then for each value uvarint(len)
// value: a name with no values keeps its place.

// headerLen is the length of h encoded by writeHeader.
func headerLen(h map[string][]string) int {
	if h == nil {
		return 0
	}
	n := uvarintLen(len(h))
	for name, values := range h {
		n += uvarintLen(len(name)) + len(name) + uvarintLen(len(values))
		for _, v := range values {
			n += uvarintLen(len(v)) + len(v)
		}
	}
	return n
}

// writeHeader encodes h into b.
func writeHeader(b *strings.Builder, h map[string][]string) {
	var n [binary.MaxVarintLen64]byte
	writeUvarint := func(x int) { b.Write(binary.AppendUvarint(n[:0], uint64(x))) }
	writeUvarint(len(h))
	for name, values := range h {
		writeUvarint(len(name))
		b.WriteString(name)
		writeUvarint(len(values))
		for _, v := range values {
			writeUvarint(len(v))
			b.WriteString(v)
		}
	}
}

// decodeHeader decodes what writeHeader encoded; its strings point into
// s.
func decodeHeader(s string) map[string][]string {
	n, s := readUvarint(s)
	h := make(map[string][]string, n)
	for range n {
		var name string
		name, s = readString(s)
		var count int
		count, s = readUvarint(s)
		values := make([]string, count)
		for j := range values {
			values[j], s = readString(s)
		}
		h[name] = values
	}
	return h
}

func readString(s string) (string, string) {
	n, s := readUvarint(s)
	return s[:n], s[n:]
}

// readUvarint reads a uvarint the cache itself wrote, so always well
// formed.
func readUvarint(s string) (int, string) {
	var x uint64
	for i, shift := 0, 0; ; i, shift = i+1, shift+7 {
		c := s[i]
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int(x), s[i+1:]
		}
	}
}

func uvarintLen(x int) int { return (bits.Len64(uint64(x)|1) + 6) / 7 }

// allocSize is the size the allocator gives an object of n bytes: n
// rounded up to its size class, or to whole pages for a large one.
func allocSize(n int) int {
	var b strings.Builder
	b.Grow(n)
	return max(b.Cap(), n)
}

package window

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"time"
)

// Memory is a Window in the process's memory, for one consumer process:
// ids are not shared with other processes and are forgotten when the
// process ends.
//
// Ids are spread by hash over shards, each with its own lock, so that
// checks on different ids rarely wait for each other. Each shard keeps its
// reserved ids and its confirmed ids in two lists ordered by deadline
// (every lease lasts Lease, every window Window), and expires ids from the
// front of the lists on each call, so expiry costs a constant time per id
// and never scans. The ids held are bounded by MaxIDs; when an id's shard
// is full, Reserve fails with ErrFull rather than forget an id that is
// still in its window. Ids longer than 64 bytes are kept as their SHA-256
// digest, so each id costs a bounded amount of memory (see docs/DEDUP.md
// for the sizing).
type Memory struct {
	cfg    MemoryConfig
	base   time.Time // the clock's reading at New: deadlines count from it
	seed   maphash.Seed
	mask   uint64
	shards []shard
}

var (
	_ Batcher = (*Memory)(nil)
	_ Leaser  = (*Memory)(nil)
)

// NewMemory returns an empty Memory; a nil cfg means defaults.
func NewMemory(cfg *MemoryConfig) (*Memory, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	perShard := (c.MaxIDs + c.Shards - 1) / c.Shards
	if perShard > math.MaxInt32 {
		return nil, fmt.Errorf("window: MemoryConfig.MaxIDs is %d, more than %d per shard with %d shards", c.MaxIDs, math.MaxInt32, c.Shards)
	}
	m := &Memory{
		cfg:    c,
		base:   c.Now(),
		seed:   maphash.MakeSeed(),
		mask:   uint64(c.Shards - 1),
		shards: make([]shard, c.Shards),
	}
	for i := range m.shards {
		m.shards[i].init(i, c.Shards, perShard)
	}
	return m, nil
}

// Lease returns MemoryConfig.Lease after defaults.
func (m *Memory) Lease() time.Duration { return m.cfg.Lease }

// Window returns MemoryConfig.Window after defaults.
func (m *Memory) Window() time.Duration { return m.cfg.Window }

// Reserve takes id for the lease (see Window). It fails with ErrFull when
// id's shard holds its share of MaxIDs; ctx is not used: Memory never
// waits for anything but a shard's lock.
func (m *Memory) Reserve(_ context.Context, id string) (Reservation, error) {
	if id == "" {
		return Reservation{}, ErrNoID
	}
	key := storedID(id)
	st, tok, err := m.shard(key).reserve(key, m.now(), m.cfg.Lease)
	return Reservation{ID: id, Status: st, Token: tok}, err
}

// Confirm records id as done for the window (see Window). It fails with
// ErrFull only when the lease had expired and the shard is full.
func (m *Memory) Confirm(_ context.Context, id string, tok Token) error {
	if id == "" {
		return ErrNoID
	}
	if tok == 0 {
		return ErrNotHeld
	}
	key := storedID(id)
	return m.shard(key).confirm(key, tok, m.now(), m.cfg.Window)
}

// Release frees id held by tok (see Window).
func (m *Memory) Release(_ context.Context, id string, tok Token) error {
	if id == "" {
		return ErrNoID
	}
	if tok == 0 {
		return ErrNotHeld
	}
	key := storedID(id)
	return m.shard(key).release(key, tok, m.now())
}

// ReserveBatch reserves each of ids in turn (see Batcher). On an error it
// releases what it reserved.
func (m *Memory) ReserveBatch(ctx context.Context, ids []string) ([]Reservation, error) {
	rs := make([]Reservation, len(ids))
	for i, id := range ids {
		r, err := m.Reserve(ctx, id)
		if err != nil {
			for _, r := range rs[:i] {
				if r.Status == Reserved {
					_ = m.Release(ctx, r.ID, r.Token)
				}
			}
			return nil, err
		}
		rs[i] = r
	}
	return rs, nil
}

// ConfirmBatch confirms each reservation in turn (see Batcher).
func (m *Memory) ConfirmBatch(ctx context.Context, rs []Reservation) error {
	return each(rs, func(r Reservation) error { return m.Confirm(ctx, r.ID, r.Token) })
}

// ReleaseBatch releases each reservation in turn (see Batcher).
func (m *Memory) ReleaseBatch(ctx context.Context, rs []Reservation) error {
	return each(rs, func(r Reservation) error { return m.Release(ctx, r.ID, r.Token) })
}

// Len returns how many ids are held, reserved or confirmed, after
// expiring those whose time is up.
func (m *Memory) Len() int {
	now := m.now()
	n := 0
	for i := range m.shards {
		n += m.shards[i].len(now)
	}
	return n
}

// now is the clock's reading in nanoseconds since New, on the monotonic
// clock when Now is time.Now.
func (m *Memory) now() int64 { return int64(m.cfg.Now().Sub(m.base)) }

func (m *Memory) shard(key string) *shard {
	return &m.shards[maphash.String(m.seed, key)&m.mask]
}

// maxStoredID is the longest id kept as it is; longer ones are kept as
// their digest.
const maxStoredID = 64

// digestMark starts the stored form of a digested id. An id that itself
// starts with it is digested too, so that no id can pass for another's
// digest.
const digestMark = "\x00sha256:"

// storedID returns the form of id that Memory keeps: id itself, or its
// digest when id is long.
func storedID(id string) string {
	if len(id) <= maxStoredID && !strings.HasPrefix(id, digestMark) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return digestMark + string(sum[:])
}

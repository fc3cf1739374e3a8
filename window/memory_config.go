package window

import (
	"fmt"
	"math/bits"
	"time"
)

// MemoryConfig configures a Memory. The zero value means defaults.
type MemoryConfig struct {
	// Lease is how long a reservation holds its id unconfirmed: longer
	// than the handler takes, since past it another consumer may reserve
	// the id and run it too. Defaults to 30 seconds.
	Lease time.Duration

	// Window is how long a confirmed id is remembered, counted from its
	// Confirm: a redelivery within it is dropped as a duplicate, one
	// after it is processed again. Defaults to 5 minutes.
	Window time.Duration

	// MaxIDs bounds the ids held (reserved or confirmed). Memory splits
	// it evenly among its shards, and Reserve fails with ErrFull when the
	// id's shard holds its share: it never forgets a live id to make
	// room. Size it above the peak rate of new ids times Window.
	// Defaults to 1,000,000.
	MaxIDs int

	// Shards is how many independently locked parts the ids are spread
	// over, by hash. It is rounded up to a power of two, and down to at
	// most MaxIDs. Defaults to 64.
	Shards int

	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

const (
	defaultLease  = 30 * time.Second
	defaultWindow = 5 * time.Minute
	defaultMaxIDs = 1_000_000
	defaultShards = 64
	maxShards     = 1 << 16
)

// withDefaults returns the configuration with every zero field set, or an
// error naming the field that is invalid.
func (c *MemoryConfig) withDefaults() (MemoryConfig, error) {
	var v MemoryConfig
	if c != nil {
		v = *c
	}
	switch {
	case v.Lease < 0:
		return v, fmt.Errorf("window: MemoryConfig.Lease is negative (%v)", v.Lease)
	case v.Window < 0:
		return v, fmt.Errorf("window: MemoryConfig.Window is negative (%v)", v.Window)
	case v.MaxIDs < 0:
		return v, fmt.Errorf("window: MemoryConfig.MaxIDs is negative (%d)", v.MaxIDs)
	case v.Shards < 0 || v.Shards > maxShards:
		return v, fmt.Errorf("window: MemoryConfig.Shards is %d, want 0 to %d", v.Shards, maxShards)
	}
	if v.Lease == 0 {
		v.Lease = defaultLease
	}
	if v.Window == 0 {
		v.Window = defaultWindow
	}
	if v.MaxIDs == 0 {
		v.MaxIDs = defaultMaxIDs
	}
	if v.Shards == 0 {
		v.Shards = defaultShards
	}
	v.Shards = 1 << bits.Len(uint(v.Shards-1)) // up to a power of two
	for v.Shards > v.MaxIDs {
		v.Shards /= 2
	}
	if v.Now == nil {
		v.Now = time.Now
	}
	return v, nil
}

package redisstore

import (
	"fmt"
	"strings"
	"time"
)

// Config configures a Store. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Prefix starts the name of every key the store writes, so that
	// several stores (or applications) share one server without seeing
	// each other's records. It must not contain '{' or '}' (they delimit
	// Redis Cluster hash tags). Defaults to "idem".
	Prefix string

	// PendingIndexes is how many sorted sets index the pending records
	// for Abandoned, each in its own hash slot so that a Redis Cluster
	// spreads them over its nodes (see docs/REDIS.md). Every process that
	// uses one Prefix must use the same number, and it must not change
	// while records are pending. Defaults to 16.
	PendingIndexes int

	// MinRetention is the least time a completed record stays in Redis
	// after Complete, even when its ExpiresAt comes sooner. A claim reads
	// an expired record as absent either way (by its ExpiresAt and the
	// claim's Now); while the record is still there, the key's next
	// token is above its token even when the next writer's clock is
	// behind the last one's (docs/REDIS.md, "Tokens"). Defaults to 10
	// minutes.
	MinRetention time.Duration

	// WaitReplicas, when positive, makes every write wait, with Redis's
	// WAIT command on the connection that wrote, until that many replicas
	// of the record's master have acknowledged it, at most WaitTimeout.
	// A write that fewer replicas acknowledged in time fails with an
	// error matching ErrNotReplicated and idem.ErrUnavailable; it did
	// happen on the master. It narrows, without closing, what a failover
	// loses (docs/REDIS.md). Defaults to 0: no WAIT.
	WaitReplicas int

	// WaitTimeout bounds each WAIT (see WaitReplicas), rounded up to
	// whole milliseconds. Keep it below the client's read timeout.
	// Defaults to 1 second.
	WaitTimeout time.Duration
}

const (
	defaultPrefix         = "idem"
	defaultPendingIndexes = 16
	defaultMinRetention   = 10 * time.Minute
	defaultWaitTimeout    = time.Second
	maxPendingIndexes     = 1 << 14
)

func (c *Config) withDefaults() (Config, error) {
	var v Config
	if c != nil {
		v = *c
	}
	switch {
	case strings.ContainsAny(v.Prefix, "{}"):
		return v, fmt.Errorf("redisstore: Config.Prefix %q contains '{' or '}'", v.Prefix)
	case v.PendingIndexes < 0 || v.PendingIndexes > maxPendingIndexes:
		return v, fmt.Errorf("redisstore: Config.PendingIndexes is %d, want 1 to %d (or 0 for the default)", v.PendingIndexes, maxPendingIndexes)
	case v.MinRetention < 0:
		return v, fmt.Errorf("redisstore: Config.MinRetention must not be negative, got %s", v.MinRetention)
	case v.WaitReplicas < 0:
		return v, fmt.Errorf("redisstore: Config.WaitReplicas must not be negative, got %d", v.WaitReplicas)
	case v.WaitTimeout < 0:
		return v, fmt.Errorf("redisstore: Config.WaitTimeout must not be negative, got %s", v.WaitTimeout)
	}
	if v.Prefix == "" {
		v.Prefix = defaultPrefix
	}
	if v.PendingIndexes == 0 {
		v.PendingIndexes = defaultPendingIndexes
	}
	if v.MinRetention == 0 {
		v.MinRetention = defaultMinRetention
	}
	if v.WaitTimeout == 0 {
		v.WaitTimeout = defaultWaitTimeout
	}
	// WAIT counts in milliseconds, and 0 would wait for ever: round up.
	v.WaitTimeout = (v.WaitTimeout + time.Millisecond - 1).Truncate(time.Millisecond)
	return v, nil
}

package idem

import (
	"fmt"
	"time"
)

// Config configures a Guard. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// TTL is how long a record is kept and replayed after it is written.
	// It must be longer than the longest realistic retry window of the
	// clients. A Request may override it. Defaults to 24 hours.
	TTL time.Duration

	// InFlightRetryAfter is the retry hint carried by an *InFlightError.
	// Defaults to 1 second.
	InFlightRetryAfter time.Duration

	// Now returns the current time. Tests inject a clock here. Defaults to
	// time.Now.
	Now func() time.Time

	// ReplayCacheBytes bounds the replay cache: recent completed records
	// kept in memory, so that a retry is replayed (or refused as a
	// mismatch) without a store call, never at or past the record's
	// ExpiresAt by Now (docs/DESIGN.md#in-process). The bytes counted are
	// those the cache takes on the heap: each entry's scope, key,
	// fingerprint, body and header, the entry itself and its place in the
	// cache's map, as the allocator rounds them. A negative value turns the
	// cache off: every call goes to the store. Defaults to
	// DefaultReplayCacheBytes (32 MiB).
	ReplayCacheBytes int64

	// ReplayCacheAge is how long the replay cache serves a record after
	// the Guard last read it from, or wrote it to, the store. It bounds
	// how long a record taken from the store behind this Guard's back (an
	// operator's Admin.Forget in another process) is still replayed here;
	// a record this Guard forgets (Guard.Forget), and everything cached
	// before a store failure, is never served again. Defaults to
	// DefaultReplayCacheAge (5 seconds).
	ReplayCacheAge time.Duration

	// Wait is how long a call whose key another call holds waits for that
	// call to end, instead of being refused with ErrInFlight at once. If
	// the holder records a result within the bound, the waiter gets it as
	// a replay (or ErrMismatch); if the holder records nothing (its work
	// failed and was rolled back), the waiter runs the work itself, as a
	// retry would, never while the holder runs. Past the bound, or when
	// the call's context ends, it gets the ErrInFlight it gets today. A
	// holder in this Guard wakes its waiters when it ends; a holder in
	// another process is polled for through the store, with a backoff of
	// 5 ms doubling up to 250 ms. A Request may override it. Defaults to
	// 0: a duplicate is refused at once.
	Wait time.Duration

	// DisableLocalInFlight turns off the in-process refusal of a key this
	// Guard is already running: every duplicate then goes to the store,
	// whose lock refuses it. Conformance suites set it to exercise the
	// store's lock. Defaults to false (refused in process).
	DisableLocalInFlight bool
}

// DefaultTTL is the default record lifetime.
const DefaultTTL = 24 * time.Hour

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.TTL < 0 {
		return out, fmt.Errorf("idem: Config.TTL must not be negative, got %s", out.TTL)
	}
	if out.InFlightRetryAfter < 0 {
		return out, fmt.Errorf("idem: Config.InFlightRetryAfter must not be negative, got %s", out.InFlightRetryAfter)
	}
	if out.ReplayCacheAge < 0 {
		return out, fmt.Errorf("idem: Config.ReplayCacheAge must not be negative, got %s", out.ReplayCacheAge)
	}
	if out.Wait < 0 {
		return out, fmt.Errorf("idem: Config.Wait must not be negative, got %s", out.Wait)
	}
	if out.TTL == 0 {
		out.TTL = DefaultTTL
	}
	if out.InFlightRetryAfter == 0 {
		out.InFlightRetryAfter = time.Second
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.ReplayCacheBytes == 0 {
		out.ReplayCacheBytes = DefaultReplayCacheBytes
	}
	if out.ReplayCacheAge == 0 {
		out.ReplayCacheAge = DefaultReplayCacheAge
	}
	return out, nil
}

package idem

import (
	"context"
	"sync/atomic"
)

// GuardStats are a Guard's counters since New.
type GuardStats struct {
	// ReplayCacheHits counts the calls answered from the replay cache (a
	// replay, or ErrMismatch), without a store call.
	ReplayCacheHits uint64
	// ReplayCacheMisses counts the calls that looked in the replay cache
	// and went on to the store: first executions, and retries of records
	// not (or no longer) cached.
	ReplayCacheMisses uint64
	// ReplayCacheEntries and ReplayCacheBytes are the cache's contents now,
	// as counted against Config.ReplayCacheBytes: the heap the cache
	// takes, its map included.
	ReplayCacheEntries int
	ReplayCacheBytes   int64
	// LocalInFlight counts the calls refused with ErrInFlight because this
	// Guard was already running their key, without a store call.
	LocalInFlight uint64
}

// Stats returns the Guard's counters. With the replay cache off, its
// fields stay zero.
func (g *Guard) Stats() GuardStats {
	st := GuardStats{LocalInFlight: g.localRefusals.Load()}
	if g.cache != nil {
		st.ReplayCacheHits = g.cache.hits.Load()
		st.ReplayCacheMisses = g.cache.misses.Load()
		st.ReplayCacheEntries, st.ReplayCacheBytes = g.cache.stats()
	}
	return st
}

// CacheUse says whether Guard.Do found its answer in the replay cache.
type CacheUse string

// The values of CallInfo.ReplayCache.
const (
	// CacheUnused: the call did not look (the cache is off, or the call
	// was refused before, such as for an invalid key).
	CacheUnused CacheUse = ""
	// CacheHit: the call was answered from the cache.
	CacheHit CacheUse = "hit"
	// CacheMiss: the call looked and went on to the store.
	CacheMiss CacheUse = "miss"
)

// CallInfo tells the caller of Guard.Do how the call was answered, for
// logs and metrics (idemhttp puts it in its Event). Pass one with
// WithCallInfo; Guard.Do fills it before it returns.
type CallInfo struct {
	// ReplayCache says whether the call was answered from the replay
	// cache.
	ReplayCache CacheUse
	// LocalInFlight is set when the call was refused with ErrInFlight
	// because the same Guard was running its key, without a store call.
	LocalInFlight bool
}

type callInfoKey struct{}

// WithCallInfo returns a context that makes Guard.Do fill info. info must
// not be read until Do has returned, nor shared by concurrent calls.
func WithCallInfo(ctx context.Context, info *CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, info)
}

// callInfo returns the CallInfo ctx carries, or a throwaway one.
func callInfo(ctx context.Context) *CallInfo {
	if info, ok := ctx.Value(callInfoKey{}).(*CallInfo); ok && info != nil {
		return info
	}
	return new(CallInfo)
}

// counters the Guard keeps besides the cache's.
type guardCounters struct {
	localRefusals atomic.Uint64
}

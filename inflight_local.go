package idem

import (
	"context"
	"sync"
	"time"
)

// localClaims are the keys this Guard is running right now, so that a
// duplicate that arrives meanwhile is refused in flight without a store
// call (docs/DESIGN.md#in-process). It only ever refuses: the store's lock
// and unique constraint still decide between processes, and between this
// Guard and any other on the same store.
type localClaims struct {
	mu   sync.Mutex
	held map[slotKey]struct{}
}

// claim takes k for the caller; false if it is already taken.
func (c *localClaims) claim(k slotKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.held[k]; ok {
		return false
	}
	if c.held == nil {
		c.held = make(map[slotKey]struct{})
	}
	c.held[k] = struct{}{}
	return true
}

func (c *localClaims) release(k slotKey) {
	c.mu.Lock()
	delete(c.held, k)
	c.mu.Unlock()
}

// inProcess answers req without the store when it can: from the replay
// cache, or in flight when this Guard is running the key. Otherwise it
// claims the key (the caller releases it when Do returns) and done is
// false.
func (g *Guard) inProcess(ctx context.Context, req Request, now time.Time) (res Result, replayed, done bool, err error) {
	k := slotKey{req.Scope, req.Key}
	if g.cache != nil {
		info := callInfo(ctx)
		fp, cached, ok := g.cache.get(k, now)
		if ok {
			info.ReplayCache = CacheHit
			if fp != req.Fingerprint {
				return Result{}, false, true, ErrMismatch
			}
			return cached, true, true, nil
		}
		info.ReplayCache = CacheMiss
	}
	if g.claims != nil && !g.claims.claim(k) {
		g.localRefusals.Add(1)
		callInfo(ctx).LocalInFlight = true
		return Result{}, false, true, &InFlightError{RetryAfter: g.cfg.InFlightRetryAfter}
	}
	return Result{}, false, false, nil
}

// remember keeps a completed record in the replay cache, if it is on.
func (g *Guard) remember(rec *Record) {
	if g.cache != nil {
		g.cache.put(rec, g.cfg.Now())
	}
}

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
	mu sync.Mutex
	// held maps each key being run to the channel closed when its run
	// ends, made only once a call waits for it (Request.Wait), so that a
	// Guard without waiters allocates nothing for it.
	held map[slotKey]chan struct{}
}

// claim takes k for the caller, and reports true. If k is taken it reports
// false, and when wait is set it also returns a channel that is closed
// when k's holder releases it.
func (c *localClaims) claim(k slotKey, wait bool) (ok bool, released <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, taken := c.held[k]; taken {
		if wait && ch == nil {
			ch = make(chan struct{})
			c.held[k] = ch
		}
		return false, ch
	}
	if c.held == nil {
		c.held = make(map[slotKey]chan struct{})
	}
	c.held[k] = nil
	return true, nil
}

func (c *localClaims) release(k slotKey) {
	c.mu.Lock()
	ch := c.held[k]
	delete(c.held, k)
	c.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// inProcess answers req without the store when it can: from the replay
// cache, or in flight when this Guard is running the key (with, when wait
// is set, the channel closed when that run ends). Otherwise it claims the
// key (the caller releases it when Do returns) and done is false.
func (g *Guard) inProcess(ctx context.Context, req Request, now time.Time, wait bool) (res Result, replayed, done bool, released <-chan struct{}, err error) {
	k := slotKey{req.Scope, req.Key}
	if g.cache != nil {
		info := callInfo(ctx)
		fp, cached, ok := g.cache.get(k, now, g.epoch.Load())
		if ok {
			info.ReplayCache = CacheHit
			if fp != req.Fingerprint {
				return Result{}, false, true, nil, ErrMismatch
			}
			return cached, true, true, nil, nil
		}
		info.ReplayCache = CacheMiss
	}
	if g.claims != nil {
		if ok, ch := g.claims.claim(k, wait); !ok {
			g.localRefusals.Add(1)
			callInfo(ctx).LocalInFlight = true
			return Result{}, false, true, ch, &InFlightError{RetryAfter: g.cfg.InFlightRetryAfter}
		}
	}
	return Result{}, false, false, nil, nil
}

// remember keeps a completed record in the replay cache, if it is on: rec
// was read from or written to the store in epoch, by a call that began at
// at (its age counts from then, so that a record deleted after the read
// began is served no later than ReplayCacheAge after the delete).
func (g *Guard) remember(rec *Record, epoch uint64, at time.Time) {
	if g.cache != nil {
		g.cache.put(rec, at, g.cfg.ReplayCacheAge, epoch)
	}
}

// storeFailed starts a new epoch of the replay cache after the store
// failed a call of ctx: the store may come back as another server that
// lacks the last commits of the one it lost (an asynchronous standby
// promoted), so nothing the cache holds is served again (see
// replayCache). A call its own caller cancelled tells nothing of the
// store.
func (g *Guard) storeFailed(ctx context.Context) {
	if ctx.Err() == nil {
		g.epoch.Add(1)
	}
}

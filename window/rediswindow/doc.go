// Package rediswindow is a window.Window in Redis (github.com/redis/go-redis/v9),
// for consumers that run in several processes: windowed dedup shared
// through one server.
//
// Reserve is a single SET NX PX (with GET, so that a taken id tells
// whether it is in progress or done: Redis 7.0 or later); Confirm and
// Release are Lua scripts that act only for the token that holds the id;
// ReserveBatch, ConfirmBatch and ReleaseBatch send a whole batch in one
// pipeline, one round trip.
//
// The window is weaker than the transactional inbox: it is not atomic with
// the handler's effect, it forgets ids after the window, and Redis itself
// can forget them before (a restart without persistence, a failover, an
// eviction). docs/DEDUP.md says what that means and how to configure the
// server: at least maxmemory-policy noeviction.
package rediswindow

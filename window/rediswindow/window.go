package rediswindow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/window"
	"github.com/redis/go-redis/v9"
)

// Window is a window.Window in Redis, shared by every consumer process
// that uses the same server and Config.Name.
//
// Each id is one key, "idem:window:<Name>:<id>". Reserve is one
// SET key "h<token>" NX PX <Lease> GET (Redis 7.0 or later): it takes a free
// id, or answers with the value that holds it ("h…" in progress, "d…"
// confirmed). Confirm and Release are Lua scripts that act only when the
// key still holds the caller's token: Confirm rewrites it as
// "d<token>" with PX <Window>, Release deletes it. Tokens are random
// 64-bit numbers. The batch forms send their commands in one pipeline.
//
// A key lives only as long as Redis keeps it: a restart without
// persistence, a failover to a replica that had not received it, or an
// eviction policy other than noeviction forgets ids within their window,
// and their redeliveries are processed again. See docs/DEDUP.md.
type Window struct {
	c      redis.Cmdable
	cfg    Config
	prefix string
}

var (
	_ window.Batcher = (*Window)(nil)
	_ window.Leaser  = (*Window)(nil)
)

// New returns a Window on the server c is a client of (a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring). It sends nothing to the server.
func New(c redis.Cmdable, cfg *Config) (*Window, error) {
	if c == nil {
		return nil, errors.New("rediswindow: New: client is nil")
	}
	v, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Window{c: c, cfg: v, prefix: KeyPrefix + v.Name + ":"}, nil
}

// Lease returns Config.Lease after defaults.
func (w *Window) Lease() time.Duration { return w.cfg.Lease }

// Window returns Config.Window after defaults.
func (w *Window) Window() time.Duration { return w.cfg.Window }

// Key returns the Redis key that holds id.
func (w *Window) Key(id string) string { return w.prefix + id }

// Reserve takes id for the lease (see window.Window), in one SET.
func (w *Window) Reserve(ctx context.Context, id string) (window.Reservation, error) {
	if id == "" {
		return window.Reservation{}, window.ErrNoID
	}
	tok := newToken()
	old, err := w.set(ctx, w.c, id, tok).Result()
	return reservation(id, tok, old, err)
}

// Confirm records id as done for the window (see window.Window), in one
// script run.
func (w *Window) Confirm(ctx context.Context, id string, tok window.Token) error {
	if id == "" {
		return window.ErrNoID
	}
	if tok == 0 {
		return window.ErrNotHeld
	}
	n, err := confirmScript.Run(ctx, w.c, []string{w.Key(id)}, w.confirmArgs(tok)...).Int64()
	return answer("confirm", id, n, err)
}

// Release frees id held by tok (see window.Window), in one script run.
func (w *Window) Release(ctx context.Context, id string, tok window.Token) error {
	if id == "" {
		return window.ErrNoID
	}
	if tok == 0 {
		return window.ErrNotHeld
	}
	n, err := releaseScript.Run(ctx, w.c, []string{w.Key(id)}, held(tok)).Int64()
	return answer("release", id, n, err)
}

// set queues or sends the reserving SET of id under tok.
func (w *Window) set(ctx context.Context, c redis.Cmdable, id string, tok window.Token) *redis.StatusCmd {
	return c.SetArgs(ctx, w.Key(id), held(tok), redis.SetArgs{Mode: "NX", TTL: w.cfg.Lease, Get: true})
}

func (w *Window) confirmArgs(tok window.Token) []any {
	return []any{held(tok), done(tok), w.cfg.Window.Milliseconds()}
}

// reservation turns the reply of the reserving SET into Reserve's answer:
// no old value means the SET took the id.
func reservation(id string, tok window.Token, old string, err error) (window.Reservation, error) {
	switch {
	case errors.Is(err, redis.Nil):
		return window.Reservation{ID: id, Status: window.Reserved, Token: tok}, nil
	case err != nil:
		return window.Reservation{}, fmt.Errorf("rediswindow: reserve %q: %w", id, err)
	case strings.HasPrefix(old, donePrefix):
		return window.Reservation{ID: id, Status: window.Done}, nil
	default:
		return window.Reservation{ID: id, Status: window.InProgress}, nil
	}
}

// answer turns a script's reply (1 done, 0 not held) into an error.
func answer(op, id string, n int64, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("rediswindow: %s %q: %w", op, id, err)
	case n != 1:
		return window.ErrNotHeld
	}
	return nil
}

// Values of a key: the token that holds it, after "h" while it is
// reserved and after "d" once it is confirmed.
const (
	heldPrefix = "h"
	donePrefix = "d"
)

func held(tok window.Token) string { return heldPrefix + strconv.FormatUint(uint64(tok), 16) }
func done(tok window.Token) string { return donePrefix + strconv.FormatUint(uint64(tok), 16) }

// newToken returns a random token, never zero. Tokens are drawn from the
// runtime's cryptographically seeded generator: two reservations of one
// id, from any process, get the same token with probability 2⁻⁶⁴.
func newToken() window.Token {
	for {
		if t := rand.Uint64(); t != 0 {
			return window.Token(t)
		}
	}
}

// confirmScript confirms KEYS[1] for ARGV[1], the held value: it marks
// the key done (ARGV[2]) for ARGV[3] milliseconds when the key is held by
// ARGV[1], or when it no longer exists (the lease expired and nobody took
// the id since). It answers 1 then, or when the key is already done by
// the same token; 0 when another token holds or confirmed it.
var confirmScript = redis.NewScript(confirmSource)

const confirmSource = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == false then
	redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	return 1
end
if v == ARGV[2] then
	return 1
end
return 0
`

// releaseScript deletes KEYS[1] when it is held by ARGV[1], the held value,
// and answers 1; else it changes nothing and answers 0.
var releaseScript = redis.NewScript(releaseSource)

const releaseSource = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('DEL', KEYS[1])
	return 1
end
return 0
`

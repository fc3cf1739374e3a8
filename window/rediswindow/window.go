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
// 64-bit numbers. The batch forms send their commands in one pipeline:
// ReserveBatch a SET per id, ConfirmBatch and ReleaseBatch a script run
// per 256 ids on a *redis.Client, per id on a cluster or a ring.
//
// A key lives only as long as Redis keeps it: a restart without
// persistence, a failover to a replica that had not received it, or an
// eviction policy other than noeviction forgets ids within their window,
// and their redeliveries are processed again. See docs/DEDUP.md.
type Window struct {
	c        redis.Cmdable
	cfg      Config
	prefix   string
	multiKey bool // one script run may cover many keys: one server
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
	_, single := c.(*redis.Client)
	return &Window{c: c, cfg: v, prefix: KeyPrefix + v.Name + ":", multiKey: single}, nil
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
	return w.one(ctx, "confirm", confirmScript, id, tok, w.cfg.Window.Milliseconds())
}

// Release frees id held by tok (see window.Window), in one script run.
func (w *Window) Release(ctx context.Context, id string, tok window.Token) error {
	return w.one(ctx, "release", releaseScript, id, tok)
}

// one runs s for id and tok, with extra after the token, and turns its
// answer (1 done, 0 not held) into an error.
func (w *Window) one(ctx context.Context, op string, s *redis.Script, id string, tok window.Token, extra ...any) error {
	if id == "" {
		return window.ErrNoID
	}
	if tok == 0 {
		return window.ErrNotHeld
	}
	ns, err := s.Run(ctx, w.c, []string{w.Key(id)}, append([]any{hex(tok)}, extra...)...).Int64Slice()
	switch {
	case err != nil:
		return fmt.Errorf("rediswindow: %s %q: %w", op, id, err)
	case len(ns) != 1:
		return fmt.Errorf("rediswindow: %s %q: the script answered %v", op, id, ns)
	case ns[0] != 1:
		return window.ErrNotHeld
	}
	return nil
}

// set queues or sends the reserving SET of id under tok.
func (w *Window) set(ctx context.Context, c redis.Cmdable, id string, tok window.Token) *redis.StatusCmd {
	return c.SetArgs(ctx, w.Key(id), held(tok), redis.SetArgs{Mode: "NX", TTL: w.cfg.Lease, Get: true})
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

// Values of a key: the token that holds it, after "h" while it is
// reserved and after "d" once it is confirmed.
const (
	heldPrefix = "h"
	donePrefix = "d"
)

func hex(tok window.Token) string  { return strconv.FormatUint(uint64(tok), 16) }
func held(tok window.Token) string { return heldPrefix + hex(tok) }

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

// The scripts take any number of keys, each with its token (in hex) in
// the ARGV of the same index, and answer a table with 1 or 0 for each key,
// in order: Confirm and Release run them with one key, the batch forms
// with many where the client allows (see Window.ConfirmBatch).

// confirmScript marks each key done by its token ("d<token>") for
// ARGV[#KEYS+1] milliseconds, when the key is held by the token
// ("h<token>") or no longer exists (the lease expired and nobody took the
// id since), and answers 1; it answers 1 too when the key is already done
// by the token, and 0, changing nothing, when another token holds or
// confirmed it.
var confirmScript = redis.NewScript(confirmSource)

const confirmSource = `
local ms = ARGV[#KEYS + 1]
local out = {}
for i, key in ipairs(KEYS) do
	local held, done = 'h' .. ARGV[i], 'd' .. ARGV[i]
	local v = redis.call('GET', key)
	if v == held or v == false then
		redis.call('SET', key, done, 'PX', ms)
		out[i] = 1
	elseif v == done then
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
`

// releaseScript deletes each key held by its token and answers 1; it
// answers 0, changing nothing, for a key that its token does not hold.
var releaseScript = redis.NewScript(releaseSource)

const releaseSource = `
local out = {}
for i, key in ipairs(KEYS) do
	if redis.call('GET', key) == 'h' .. ARGV[i] then
		redis.call('DEL', key)
		out[i] = 1
	else
		out[i] = 0
	end
end
return out
`

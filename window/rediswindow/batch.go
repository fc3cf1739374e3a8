package rediswindow

import (
	"context"
	"fmt"
	"slices"

	"github.com/idemkit/idem/window"
	"github.com/redis/go-redis/v9"
)

// ReserveBatch reserves each of ids (see window.Batcher) in one pipeline of
// SETs: one round trip. An empty id fails the whole batch with
// window.ErrNoID before anything is sent. On any other error, it releases
// what it reserved, as far as the server lets it.
func (w *Window) ReserveBatch(ctx context.Context, ids []string) ([]window.Reservation, error) {
	for _, id := range ids {
		if id == "" {
			return nil, window.ErrNoID
		}
	}
	if len(ids) == 0 {
		return []window.Reservation{}, nil
	}
	toks := make([]window.Token, len(ids))
	cmds := make([]*redis.StatusCmd, len(ids))
	pipe := w.c.Pipeline()
	for i, id := range ids {
		toks[i] = newToken()
		cmds[i] = w.set(ctx, pipe, id, toks[i])
	}
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	rs := make([]window.Reservation, len(ids))
	var first error
	var taken []window.Reservation // what to give back on an error
	for i, cmd := range cmds {
		old, err := cmd.Result()
		r, err := reservation(ids[i], toks[i], old, err)
		switch {
		case err != nil && first == nil:
			first = err
		case r.Status == window.Reserved:
			taken = append(taken, r)
		}
		rs[i] = r
	}
	if first != nil {
		if len(taken) > 0 {
			_ = w.ReleaseBatch(context.WithoutCancel(ctx), taken)
		}
		return nil, first
	}
	return rs, nil
}

// ConfirmBatch confirms each reservation (see window.Batcher) in one
// round trip (see scriptBatch).
func (w *Window) ConfirmBatch(ctx context.Context, rs []window.Reservation) error {
	return w.scriptBatch(ctx, "confirm", confirmScript, rs, w.cfg.Window.Milliseconds())
}

// ReleaseBatch releases each reservation (see window.Batcher) in one round
// trip (see scriptBatch).
func (w *Window) ReleaseBatch(ctx context.Context, rs []window.Reservation) error {
	return w.scriptBatch(ctx, "release", releaseScript, rs)
}

// maxScriptKeys bounds the keys of one script run: Redis serves no other
// client while a script runs.
const maxScriptKeys = 256

// scriptBatch runs s for the reservations with a non-zero token (the
// others are not held), in one pipeline, and gathers the ones not held in
// a *window.BatchError. On a *redis.Client, one run covers up to
// maxScriptKeys ids; on a cluster or a ring, whose keys live on several
// nodes, each id gets its own run. When the server does not have the
// script cached (after a restart or a SCRIPT FLUSH), it loads it and sends
// the refused runs again: a refused run did nothing, so that is safe.
func (w *Window) scriptBatch(ctx context.Context, op string, s *redis.Script, rs []window.Reservation, extra ...any) error {
	for _, r := range rs {
		if r.ID == "" {
			return window.ErrNoID
		}
	}
	var notHeld []int
	pending := make([]int, 0, len(rs))
	for i, r := range rs {
		if r.Token == 0 {
			notHeld = append(notHeld, i)
			continue
		}
		pending = append(pending, i)
	}
	size := 1
	if w.multiKey {
		size = maxScriptKeys
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		var groups [][]int
		for start := 0; start < len(pending); start += size {
			groups = append(groups, pending[start:min(start+size, len(pending))])
		}
		pipe := w.c.Pipeline()
		cmds := make([]*redis.Cmd, len(groups))
		for g, group := range groups {
			keys := make([]string, len(group))
			args := make([]any, 0, len(group)+len(extra))
			for k, i := range group {
				keys[k] = w.Key(rs[i].ID)
				args = append(args, hex(rs[i].Token))
			}
			cmds[g] = s.EvalSha(ctx, pipe, keys, append(args, extra...)...)
		}
		_, _ = pipe.Exec(ctx) // each command's own error is read below
		var again []int
		for g, group := range groups {
			ns, err := cmds[g].Int64Slice()
			switch {
			case redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0:
				again = append(again, group...)
				continue
			case err != nil:
				return fmt.Errorf("rediswindow: %s %q: %w", op, rs[group[0]].ID, err)
			case len(ns) != len(group):
				return fmt.Errorf("rediswindow: %s: the script answered %d results for %d ids", op, len(ns), len(group))
			}
			for k, i := range group {
				if ns[k] != 1 {
					notHeld = append(notHeld, i)
				}
			}
		}
		if len(again) > 0 {
			if err := s.Load(ctx, w.c).Err(); err != nil {
				return fmt.Errorf("rediswindow: load the %s script: %w", op, err)
			}
		}
		pending = again
	}
	slices.Sort(notHeld)
	return window.NotHeld(notHeld)
}

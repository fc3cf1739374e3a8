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
	for i, cmd := range cmds {
		old, err := cmd.Result()
		r, err := reservation(ids[i], toks[i], old, err)
		if err != nil && first == nil {
			first = err
		}
		rs[i] = r
	}
	if first != nil {
		_ = w.ReleaseBatch(context.WithoutCancel(ctx), rs)
		return nil, first
	}
	return rs, nil
}

// ConfirmBatch confirms each reservation (see window.Batcher) in one
// pipeline of script runs.
func (w *Window) ConfirmBatch(ctx context.Context, rs []window.Reservation) error {
	return w.scriptBatch(ctx, "confirm", confirmScript, rs, func(r window.Reservation) []any {
		return w.confirmArgs(r.Token)
	})
}

// ReleaseBatch releases each reservation (see window.Batcher) in one
// pipeline of script runs. Reservations with the zero token (ids that
// were not Reserved) are skipped and reported as not held.
func (w *Window) ReleaseBatch(ctx context.Context, rs []window.Reservation) error {
	return w.scriptBatch(ctx, "release", releaseScript, rs, func(r window.Reservation) []any {
		return []any{held(r.Token)}
	})
}

// scriptBatch runs s once per reservation with a non-zero token, in one
// pipeline, and gathers the ones not held in a *window.BatchError. When
// the server does not have the script cached (after a restart or a
// SCRIPT FLUSH), it loads it and runs the commands that were refused
// again: a refused run did nothing, so running it again is safe.
func (w *Window) scriptBatch(ctx context.Context, op string, s *redis.Script, rs []window.Reservation, args func(window.Reservation) []any) error {
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
	for attempt := 0; len(pending) > 0; attempt++ {
		pipe := w.c.Pipeline()
		cmds := make([]*redis.Cmd, len(pending))
		for k, i := range pending {
			cmds[k] = s.EvalSha(ctx, pipe, []string{w.Key(rs[i].ID)}, args(rs[i])...)
		}
		_, _ = pipe.Exec(ctx)
		var again []int
		for k, i := range pending {
			n, err := cmds[k].Int64()
			switch {
			case redis.HasErrorPrefix(err, "NOSCRIPT") && attempt == 0:
				again = append(again, i)
			case err != nil:
				return fmt.Errorf("rediswindow: %s %q: %w", op, rs[i].ID, err)
			case n != 1:
				notHeld = append(notHeld, i)
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

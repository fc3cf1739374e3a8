package window

import (
	"context"
	"errors"
)

// ReserveAll reserves each of ids, through w's ReserveBatch when w is a
// Batcher, else one Reserve at a time. On an error, reservations made
// before it are left to expire with their lease.
func ReserveAll(ctx context.Context, w Window, ids []string) ([]Reservation, error) {
	if b, ok := w.(Batcher); ok {
		return b.ReserveBatch(ctx, ids)
	}
	rs := make([]Reservation, len(ids))
	for i, id := range ids {
		r, err := w.Reserve(ctx, id)
		if err != nil {
			return nil, err
		}
		rs[i] = r
	}
	return rs, nil
}

// ConfirmAll confirms each reservation, through w's ConfirmBatch when w is
// a Batcher; its error is as Batcher.ConfirmBatch's.
func ConfirmAll(ctx context.Context, w Window, rs []Reservation) error {
	if b, ok := w.(Batcher); ok {
		return b.ConfirmBatch(ctx, rs)
	}
	return each(rs, func(r Reservation) error { return w.Confirm(ctx, r.ID, r.Token) })
}

// ReleaseAll releases each reservation, through w's ReleaseBatch when w is
// a Batcher; its error is as Batcher.ReleaseBatch's.
func ReleaseAll(ctx context.Context, w Window, rs []Reservation) error {
	if b, ok := w.(Batcher); ok {
		return b.ReleaseBatch(ctx, rs)
	}
	return each(rs, func(r Reservation) error { return w.Release(ctx, r.ID, r.Token) })
}

// each calls f for every reservation and gathers the ErrNotHeld answers in
// a *BatchError; it stops at any other error. An empty id fails the batch
// before f is called.
func each(rs []Reservation, f func(Reservation) error) error {
	for _, r := range rs {
		if r.ID == "" {
			return ErrNoID
		}
	}
	var notHeld []int
	for i, r := range rs {
		switch err := f(r); {
		case err == nil:
		case errors.Is(err, ErrNotHeld):
			notHeld = append(notHeld, i)
		default:
			return err
		}
	}
	return NotHeld(notHeld)
}

// NotHeld returns a *BatchError listing the indexes not held, or nil when
// there are none: the error a Batcher's Confirm or Release returns.
func NotHeld(indexes []int) error {
	if len(indexes) == 0 {
		return nil
	}
	return &BatchError{NotHeld: indexes}
}

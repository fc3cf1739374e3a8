package window_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/window"
)

// ctxWindow is a Window whose Confirm and Release fail when their context
// has ended, as a remote store's do.
type ctxWindow struct {
	window.Window
	releaseErr error
}

func (w ctxWindow) Confirm(ctx context.Context, id string, tok window.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return w.Window.Confirm(ctx, id, tok)
}

func (w ctxWindow) Release(ctx context.Context, id string, tok window.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if w.releaseErr != nil {
		return w.releaseErr
	}
	return w.Window.Release(ctx, id, tok)
}

func TestDoHandlerContextEndsWithTheLease(t *testing.T) {
	t.Parallel()
	m := newMemory(t, &window.MemoryConfig{Lease: time.Hour})
	var deadline time.Time
	var ok bool
	before := time.Now()
	if _, err := window.Do(context.Background(), m, "a", func(ctx context.Context) error {
		deadline, ok = ctx.Deadline()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !ok || deadline.Before(before.Add(time.Hour)) || deadline.After(time.Now().Add(time.Hour)) {
		t.Fatalf("handler deadline = %v (set %v), want an hour after Do began", deadline, ok)
	}

	// A Window that is not a Leaser sets no deadline.
	if _, err := window.Do(context.Background(), ctxWindow{Window: m}, "b", func(ctx context.Context) error {
		_, ok = ctx.Deadline()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatal("the handler of a window that is not a Leaser got a deadline")
	}
}

// TestDoConfirmsAfterTheCallerGaveUp: a handler that succeeded is
// confirmed even when the caller's context ended meanwhile; a failed one
// is released.
func TestDoConfirmsAfterTheCallerGaveUp(t *testing.T) {
	t.Parallel()
	w := ctxWindow{Window: newMemory(t, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	o, err := window.Do(ctx, w, "a", func(context.Context) error { cancel(); return nil })
	if o != window.Applied || err != nil {
		t.Fatalf("Do = %v, %v; want Applied", o, err)
	}
	reserve(t, w, "a", window.Done)

	ctx, cancel = context.WithCancel(context.Background())
	boom := errors.New("boom")
	if o, err := window.Do(ctx, w, "b", func(context.Context) error { cancel(); return boom }); o != window.Retry || !errors.Is(err, boom) {
		t.Fatalf("Do = %v, %v; want Retry and the handler's error", o, err)
	}
	reserve(t, w, "b", window.Reserved)
}

// TestDoAppliedButNotConfirmed: a handler that outlives its lease, while
// another consumer takes the id, is Applied with ErrNotHeld.
func TestDoAppliedButNotConfirmed(t *testing.T) {
	t.Parallel()
	c := testclock.New()
	m := newMemory(t, &window.MemoryConfig{Lease: time.Minute, Now: c.Now})
	o, err := window.Do(context.Background(), m, "a", func(context.Context) error {
		c.Advance(time.Minute)
		reserve(t, m, "a", window.Reserved)
		return nil
	})
	if o != window.Applied || !errors.Is(err, window.ErrNotHeld) {
		t.Fatalf("Do = %v, %v; want Applied and ErrNotHeld", o, err)
	}
	if !o.Settled() {
		t.Fatal("Applied is not settled")
	}
}

func TestDoOutcomes(t *testing.T) {
	t.Parallel()
	m := newMemory(t, nil)
	ran := false
	handler := func(context.Context) error { ran = true; return nil }

	if o, err := window.Do(context.Background(), m, "", handler); o != window.Retry || !errors.Is(err, window.ErrNoID) || ran {
		t.Fatalf("Do with an empty id = %v, %v, ran %v; want Retry and ErrNoID, no run", o, err, ran)
	}
	reserve(t, m, "held", window.Reserved)
	if o, err := window.Do(context.Background(), m, "held", handler); o != window.Retry || !errors.Is(err, window.ErrInProgress) || ran || o.Settled() {
		t.Fatalf("Do of a held id = %v, %v, ran %v; want Retry and ErrInProgress, no run", o, err, ran)
	}

	// A release that fails is reported with the handler's error.
	boom, down := errors.New("boom"), errors.New("store down")
	o, err := window.Do(context.Background(), ctxWindow{Window: m, releaseErr: down}, "a", func(context.Context) error { return boom })
	if o != window.Retry || !errors.Is(err, boom) || !errors.Is(err, down) {
		t.Fatalf("Do with a failing release = %v, %v; want Retry with both errors", o, err)
	}
}

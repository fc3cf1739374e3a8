package windowtest

import (
	"testing"
	"time"

	"github.com/idemkit/idem/window"
)

// The budgets below are real time from a mark to the end of the checks
// that count on something still live: on real time, a lease or window that
// began after the mark is still live if the checks ended within it. A few
// milliseconds are kept for a store's clock granularity.
const grain = 10 * time.Millisecond

func leaseExpires(t testing.TB, h *Harness) {
	e := setupShort(t, h)
	var first window.Reservation
	e.timely(e.lease-grain, func(a int, mark func()) func() {
		mark()
		first = e.reserve(id("a", a), window.Reserved)
		r, err := e.w.Reserve(e.ctx, id("a", a))
		return func() {
			if err != nil {
				t.Fatalf("Reserve of a held id: %v", err)
			}
			checkReservation(t, id("a", a), r, window.InProgress)
		}
	})
	e.advance(e.lease + e.margin())
	second := e.reserve(first.ID, window.Reserved)
	if second.Token == first.Token {
		t.Fatalf("the expired lease's token %d was given again", first.Token)
	}
}

func expiredOwnerCannotTouchTheNewHolder(t testing.TB, h *Harness) {
	e := setupShort(t, h)
	e.timely(e.lease-grain, func(a int, mark func()) func() {
		key := id("a", a)
		first := e.reserve(key, window.Reserved)
		e.advance(e.lease + e.margin())
		mark()
		second := e.reserve(key, window.Reserved)
		confirmErr := e.w.Confirm(e.ctx, key, first.Token)
		releaseErr := e.w.Release(e.ctx, key, first.Token)
		after, afterErr := e.w.Reserve(e.ctx, key)
		secondErr := e.w.Confirm(e.ctx, key, second.Token)
		return func() {
			notHeld(t, "the expired owner's Confirm", confirmErr)
			notHeld(t, "the expired owner's Release", releaseErr)
			if afterErr != nil {
				t.Fatalf("Reserve: %v", afterErr)
			}
			checkReservation(t, key, after, window.InProgress)
			if secondErr != nil {
				t.Fatalf("the new holder's Confirm: %v", secondErr)
			}
			e.reserve(key, window.Done)
			notHeld(t, "the expired owner's Confirm after the new holder's", e.w.Confirm(e.ctx, key, first.Token))
			notHeld(t, "the expired owner's Release after the new holder's Confirm", e.w.Release(e.ctx, key, first.Token))
			e.reserve(key, window.Done)
		}
	})
}

func lateConfirmRecordsAnUnclaimedID(t testing.TB, h *Harness) {
	e := setupShort(t, h)
	e.timely(e.window-grain, func(a int, mark func()) func() {
		key := id("a", a)
		r := e.reserve(key, window.Reserved)
		e.advance(e.lease + e.margin())
		mark()
		err := e.w.Confirm(e.ctx, key, r.Token)
		after, afterErr := e.w.Reserve(e.ctx, key)
		return func() {
			if err != nil {
				t.Fatalf("Confirm after the lease expired, nobody holding the id: %v, want nil", err)
			}
			if afterErr != nil {
				t.Fatalf("Reserve: %v", afterErr)
			}
			checkReservation(t, key, after, window.Done)
		}
	})
}

func confirmExtendsToTheWindow(t testing.TB, h *Harness) {
	e := setupShort(t, h)
	e.timely(e.window-grain, func(a int, mark func()) func() {
		key := id("a", a)
		r := e.reserve(key, window.Reserved)
		mark()
		e.confirm(key, r.Token)
		e.advance(e.lease + e.margin())
		after, err := e.w.Reserve(e.ctx, key)
		return func() {
			if err != nil {
				t.Fatalf("Reserve: %v", err)
			}
			checkReservation(t, key, after, window.Done)
		}
	})
}

func windowExpires(t testing.TB, h *Harness) {
	e := setupShort(t, h)
	r := e.reserve("a", window.Reserved)
	e.confirm("a", r.Token)
	e.advance(e.window + e.margin())
	again := e.reserve("a", window.Reserved)
	if again.Token == r.Token {
		t.Fatalf("the forgotten id was reserved under its old token %d", r.Token)
	}
}

func expiryBoundaries(t testing.TB, h *Harness) {
	e := setup(t, h)
	r := e.reserve("a", window.Reserved)
	e.advance(e.lease - time.Nanosecond)
	e.reserve("a", window.InProgress)
	e.advance(time.Nanosecond)
	r2 := e.reserve("a", window.Reserved)
	if r2.Token == r.Token {
		t.Fatal("the expired lease's token was given again")
	}
	e.confirm("a", r2.Token)
	e.advance(e.window - time.Nanosecond)
	e.reserve("a", window.Done)
	e.advance(time.Nanosecond)
	e.reserve("a", window.Reserved)

	// A late Confirm remembers the id for a whole window from itself.
	late := e.reserve("b", window.Reserved)
	e.advance(e.lease)
	if err := e.w.Confirm(e.ctx, "b", late.Token); err != nil {
		t.Fatalf("late Confirm: %v", err)
	}
	e.advance(e.window - time.Nanosecond)
	e.reserve("b", window.Done)
	e.advance(time.Nanosecond)
	if r, err := e.w.Reserve(e.ctx, "b"); err != nil || r.Status != window.Reserved {
		t.Fatalf("Reserve at Window after the late Confirm = %v, %v; want Reserved", r.Status, err)
	}
}

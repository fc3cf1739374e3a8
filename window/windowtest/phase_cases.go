package windowtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem/window"
)

func newIDIsReserved(t testing.TB, h *Harness) {
	e := setup(t, h)
	e.reserve("a", window.Reserved)
	e.reserve("b", window.Reserved)
}

func heldIDIsInProgress(t testing.TB, h *Harness) {
	e := setup(t, h)
	e.reserve("a", window.Reserved)
	for range 3 {
		e.reserve("a", window.InProgress)
	}
}

func confirmedIDIsDone(t testing.TB, h *Harness) {
	e := setup(t, h)
	r := e.reserve("a", window.Reserved)
	e.confirm("a", r.Token)
	for range 3 {
		e.reserve("a", window.Done)
	}
}

func confirmAgainByTheOwnerChangesNothing(t testing.TB, h *Harness) {
	e := setup(t, h)
	r := e.reserve("a", window.Reserved)
	e.confirm("a", r.Token)
	e.confirm("a", r.Token)
	e.reserve("a", window.Done)
}

func releaseFreesTheIDAtOnce(t testing.TB, h *Harness) {
	e := setup(t, h)
	r1 := e.reserve("a", window.Reserved)
	e.release("a", r1.Token)
	r2 := e.reserve("a", window.Reserved)
	if r2.Token == r1.Token {
		t.Fatalf("the id was reserved again under the released token %d", r1.Token)
	}
	notHeld(t, "Release with the released token", e.w.Release(e.ctx, "a", r1.Token))
	notHeld(t, "Confirm with the released token", e.w.Confirm(e.ctx, "a", r1.Token))
	e.reserve("a", window.InProgress)
	e.confirm("a", r2.Token)
	e.reserve("a", window.Done)
}

func failedHandlerIsProcessedOnRedelivery(t testing.TB, h *Harness) {
	e := setup(t, h)
	boom := errors.New("handler failed")
	runs := 0
	deliver := func(fail bool) (window.Outcome, error) {
		return window.Do(e.ctx, e.w, "m", func(context.Context) error {
			runs++
			if fail {
				return boom
			}
			return nil
		})
	}
	if o, err := deliver(true); o != window.Retry || !errors.Is(err, boom) {
		t.Fatalf("first delivery, failing: Do = %v, %v; want Retry and the handler's error", o, err)
	}
	if o, err := deliver(false); o != window.Applied || err != nil {
		t.Fatalf("redelivery after the failure: Do = %v, %v; want Applied (the message must not be dropped)", o, err)
	}
	if runs != 2 {
		t.Fatalf("the handler ran %d times over two deliveries, want 2", runs)
	}
	for range 2 {
		if o, err := deliver(false); o != window.Duplicate || err != nil {
			t.Fatalf("delivery after success: Do = %v, %v; want Duplicate", o, err)
		}
	}
	if runs != 2 {
		t.Fatalf("the handler ran %d times, want 2: a duplicate ran it", runs)
	}
}

func panickingHandlerReleasesTheID(t testing.TB, h *Harness) {
	e := setup(t, h)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Do swallowed the handler's panic")
			}
		}()
		_, _ = window.Do(e.ctx, e.w, "m", func(context.Context) error { panic("handler panicked") })
	}()
	ran := false
	o, err := window.Do(e.ctx, e.w, "m", func(context.Context) error { ran = true; return nil })
	if o != window.Applied || err != nil || !ran {
		t.Fatalf("redelivery after a panic: Do = %v, %v, ran %v; want Applied and a run", o, err, ran)
	}
}

func onlyTheOwnerConfirms(t testing.TB, h *Harness) {
	e := setup(t, h)
	other := e.reserve("other", window.Reserved)
	released := e.reserve("a", window.Reserved)
	e.release("a", released.Token)
	owner := e.reserve("a", window.Reserved)
	for _, tok := range []window.Token{0, other.Token, released.Token, owner.Token + 1} {
		if tok == owner.Token {
			continue
		}
		notHeld(t, "Confirm with another token", e.w.Confirm(e.ctx, "a", tok))
		e.reserve("a", window.InProgress)
	}
	e.confirm("a", owner.Token)
	e.reserve("a", window.Done)
	// A confirmed id is not confirmed again under another token either.
	notHeld(t, "Confirm of a confirmed id with another token", e.w.Confirm(e.ctx, "a", other.Token))
}

func onlyTheOwnerReleases(t testing.TB, h *Harness) {
	e := setup(t, h)
	other := e.reserve("other", window.Reserved)
	released := e.reserve("a", window.Reserved)
	e.release("a", released.Token)
	owner := e.reserve("a", window.Reserved)
	for _, tok := range []window.Token{0, other.Token, released.Token, owner.Token + 1} {
		if tok == owner.Token {
			continue
		}
		notHeld(t, "Release with another token", e.w.Release(e.ctx, "a", tok))
		e.reserve("a", window.InProgress)
	}
	// The other id's owner is untouched too.
	e.reserve("other", window.InProgress)
	e.release("a", owner.Token)
	e.reserve("a", window.Reserved)
}

func confirmedIDIsNeverReleased(t testing.TB, h *Harness) {
	e := setup(t, h)
	r := e.reserve("a", window.Reserved)
	e.confirm("a", r.Token)
	notHeld(t, "Release of a confirmed id by its owner", e.w.Release(e.ctx, "a", r.Token))
	e.reserve("a", window.Done)
}

func emptyIDIsRefused(t testing.TB, h *Harness) {
	e := setup(t, h)
	if _, err := e.w.Reserve(e.ctx, ""); !errors.Is(err, window.ErrNoID) {
		t.Fatalf("Reserve(\"\") = %v, want ErrNoID", err)
	}
	r := e.reserve("a", window.Reserved)
	if err := e.w.Confirm(e.ctx, "", r.Token); !errors.Is(err, window.ErrNoID) {
		t.Fatalf("Confirm(\"\") = %v, want ErrNoID", err)
	}
	if err := e.w.Release(e.ctx, "", r.Token); !errors.Is(err, window.ErrNoID) {
		t.Fatalf("Release(\"\") = %v, want ErrNoID", err)
	}
	e.reserve("a", window.InProgress)
}

func idsAreComparedExactly(t testing.TB, h *Harness) {
	e := setup(t, h)
	long := strings.Repeat("x", 999)
	ids := []string{
		"a", "A", "a ", " a", "a\x00", "ä", "a\xff",
		"a:b", "a*", "{a}", "*", ":",
		long + "1", long + "2", long,
		"\x00sha256:" + strings.Repeat("y", 32),
	}
	for _, id := range ids {
		e.reserve(id, window.Reserved)
	}
	for _, id := range ids {
		e.reserve(id, window.InProgress)
	}
}

func tokensAreUnique(t testing.TB, h *Harness) {
	e := setup(t, h)
	seen := make(map[window.Token]string)
	add := func(r window.Reservation) {
		if prev, ok := seen[r.Token]; ok {
			t.Fatalf("token %d was given to %q and to %q", r.Token, prev, r.ID)
		}
		seen[r.Token] = r.ID
	}
	for i := range 300 {
		add(e.reserve(id("u", i), window.Reserved))
	}
	for range 50 {
		r := e.reserve("again", window.Reserved)
		add(r)
		e.release("again", r.Token)
	}
}

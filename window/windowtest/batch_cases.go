package windowtest

import (
	"errors"
	"slices"
	"testing"

	"github.com/idemkit/idem/window"
)

func batchReserveAnswersEachIDInOrder(t testing.TB, h *Harness) {
	e := setup(t, h)
	b := e.batcher()
	held := e.reserve("held", window.Reserved)
	done := e.reserve("done", window.Reserved)
	e.confirm("done", done.Token)

	ids := []string{"new1", "held", "done", "twice", "new2", "twice"}
	want := []window.Status{window.Reserved, window.InProgress, window.Done, window.Reserved, window.Reserved, window.InProgress}
	rs, err := b.ReserveBatch(e.ctx, ids)
	if err != nil {
		t.Fatalf("ReserveBatch: %v", err)
	}
	if len(rs) != len(ids) {
		t.Fatalf("ReserveBatch of %d ids answered %d", len(ids), len(rs))
	}
	for i, r := range rs {
		checkReservation(t, ids[i], r, want[i])
	}
	// The answers hold as the single forms' would.
	e.reserve("new1", window.InProgress)
	e.confirm("twice", rs[3].Token)
	e.reserve("twice", window.Done)
	e.release("held", held.Token)
	e.reserve("held", window.Reserved)

	if rs, err := b.ReserveBatch(e.ctx, nil); err != nil || len(rs) != 0 {
		t.Fatalf("ReserveBatch of no ids = %v, %v; want nothing", rs, err)
	}
}

func batchConfirmAndReleaseOnlyTheirOwn(t testing.TB, h *Harness) {
	e := setup(t, h)
	b := e.batcher()
	rs, err := b.ReserveBatch(e.ctx, []string{"c1", "c2", "r1", "r2"})
	if err != nil {
		t.Fatalf("ReserveBatch: %v", err)
	}
	foreign := e.reserve("foreign", window.Reserved)
	for i, r := range rs {
		checkReservation(t, r.ID, r, window.Reserved)
		if r.ID != []string{"c1", "c2", "r1", "r2"}[i] {
			t.Fatalf("ReserveBatch answer %d is for %q", i, r.ID)
		}
	}

	// Confirm c1 and c2 with their tokens, r1 with c1's and foreign with
	// the zero token: the last two are not held.
	confirms := []window.Reservation{rs[0], rs[1], {ID: "r1", Token: rs[0].Token}, {ID: "foreign"}}
	checkNotHeldAt(t, "ConfirmBatch", b.ConfirmBatch(e.ctx, confirms), []int{2, 3})
	e.reserve("c1", window.Done)
	e.reserve("c2", window.Done)
	e.reserve("r1", window.InProgress)
	e.reserve("foreign", window.InProgress)

	// Release r1 and r2 with their tokens, c1 (confirmed) with its own
	// and foreign with r2's: the last two are not held.
	releases := []window.Reservation{rs[2], rs[3], rs[0], {ID: "foreign", Token: rs[3].Token}}
	checkNotHeldAt(t, "ReleaseBatch", b.ReleaseBatch(e.ctx, releases), []int{2, 3})
	e.reserve("r1", window.Reserved)
	e.reserve("r2", window.Reserved)
	e.reserve("c1", window.Done)
	e.reserve("foreign", window.InProgress)
	e.release("foreign", foreign.Token)

	if err := b.ConfirmBatch(e.ctx, nil); err != nil {
		t.Fatalf("ConfirmBatch of nothing: %v", err)
	}
	if err := b.ReleaseBatch(e.ctx, nil); err != nil {
		t.Fatalf("ReleaseBatch of nothing: %v", err)
	}
}

func checkNotHeldAt(t testing.TB, op string, err error, want []int) {
	t.Helper()
	var be *window.BatchError
	switch {
	case !errors.As(err, &be):
		t.Fatalf("%s = %v, want a *window.BatchError", op, err)
	case !errors.Is(err, window.ErrNotHeld):
		t.Fatalf("%s's error %v does not match ErrNotHeld", op, err)
	case !slices.Equal(be.NotHeld, want):
		t.Fatalf("%s reported indexes %v not held, want %v", op, be.NotHeld, want)
	}
}

func batchWithAnEmptyIDDoesNothing(t testing.TB, h *Harness) {
	e := setup(t, h)
	b := e.batcher()
	if _, err := b.ReserveBatch(e.ctx, []string{"a", "b", "", "c"}); !errors.Is(err, window.ErrNoID) {
		t.Fatalf("ReserveBatch with an empty id = %v, want ErrNoID", err)
	}
	var held []window.Reservation
	for _, id := range []string{"a", "b", "c"} {
		held = append(held, e.reserve(id, window.Reserved))
	}
	bad := append(held[:2:2], window.Reservation{ID: "", Token: held[2].Token})
	if err := b.ConfirmBatch(e.ctx, bad); !errors.Is(err, window.ErrNoID) {
		t.Fatalf("ConfirmBatch with an empty id = %v, want ErrNoID", err)
	}
	if err := b.ReleaseBatch(e.ctx, bad); !errors.Is(err, window.ErrNoID) {
		t.Fatalf("ReleaseBatch with an empty id = %v, want ErrNoID", err)
	}
	for _, id := range []string{"a", "b", "c"} {
		e.reserve(id, window.InProgress)
	}
}

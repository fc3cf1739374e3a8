package window

import (
	"context"
	"errors"
	"strconv"
)

// Window remembers message ids for a while, in two phases: Reserve takes an
// id for a short lease while its handler runs; Confirm, after the handler
// succeeded, keeps the id for the window; Release, after it failed, frees
// the id so that the redelivery is processed, not dropped. The lease and
// the window are durations of the Window's configuration.
//
// The contract every implementation keeps, and that windowtest checks:
//
//   - Reserve of an id that nobody holds and that was not confirmed within
//     the window answers Reserved with a new Token, unique among the
//     Window's tokens; one Reserve at most wins, however many run at once.
//   - Reserve of an id under a live lease answers InProgress; of an id
//     confirmed within the window, Done. Neither carries a Token.
//   - A lease lasts Lease from its Reserve; unconfirmed, it then expires and
//     the id can be reserved again.
//   - Confirm with the Token that holds the id records the id as done for
//     Window from the Confirm. Confirm with a token that no longer holds the
//     id also records it when nobody holds it any more (the lease expired
//     unclaimed: the handler succeeded, so the id did take effect). It fails
//     with ErrNotHeld, changing nothing, when the id is held or was
//     confirmed under another token, and always for the zero Token.
//     Confirm again by the same token succeeds and changes nothing.
//   - Release with the Token that holds the id frees it at once. With any
//     other token, or once the id is confirmed, it fails with ErrNotHeld and
//     changes nothing: only the owner of a live lease can free an id, and
//     nothing frees a confirmed id before its window ends.
//   - An empty id is refused with ErrNoID.
//   - Other errors mean the Window could not answer (a store unreachable,
//     a full Memory): the caller must not process the message, and should
//     have it delivered again later.
//
// The window is not atomic with the handler's effect: see docs/DEDUP.md for
// what it does and does not guarantee. Implementations are safe for
// concurrent use.
type Window interface {
	// Reserve takes id for a lease if it is free (see Status).
	Reserve(ctx context.Context, id string) (Reservation, error)
	// Confirm records id as done for the window, after its handler
	// succeeded.
	Confirm(ctx context.Context, id string, tok Token) error
	// Release frees id held by tok, after its handler failed.
	Release(ctx context.Context, id string, tok Token) error
}

// Batcher is the batch form of a Window: many ids in one call, and one
// round trip to a remote store. Each item is answered as the single form
// would answer it, in order, so an id that appears twice in one batch is
// reserved by its first occurrence. Callers type-assert a Window to Batcher;
// ReserveAll, ConfirmAll and ReleaseAll fall back to the single forms.
type Batcher interface {
	Window
	// ReserveBatch reserves each of ids; the i-th Reservation answers
	// ids[i]. With an empty id it fails with ErrNoID and reserves
	// nothing.
	ReserveBatch(ctx context.Context, ids []string) ([]Reservation, error)
	// ConfirmBatch confirms each reservation with its ID and Token. The
	// error is nil when all were confirmed; a *BatchError (matching
	// ErrNotHeld) lists those that were not; ErrNoID means an ID was
	// empty, and nothing was done; any other error means the call failed
	// and each item's fate is unknown.
	ConfirmBatch(ctx context.Context, rs []Reservation) error
	// ReleaseBatch releases each reservation with its ID and Token; the
	// error is as ConfirmBatch's.
	ReleaseBatch(ctx context.Context, rs []Reservation) error
}

// Status is Reserve's answer about an id.
type Status uint8

// Statuses of Reserve. The zero Status is none of them.
const (
	// Reserved: the id was free and is now held by the Reservation's
	// Token for the lease. Process the message, then Confirm or Release.
	Reserved Status = iota + 1
	// InProgress: another holder's lease on the id is live. Do not
	// process the message; have it delivered again later.
	InProgress
	// Done: the id was confirmed within the window. Drop the message as
	// a duplicate (acknowledge it).
	Done
)

// String returns the status's name.
func (s Status) String() string {
	switch s {
	case Reserved:
		return "reserved"
	case InProgress:
		return "in progress"
	case Done:
		return "done"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Token proves the ownership of a reservation. The zero Token holds
// nothing.
type Token uint64

// Reservation is Reserve's answer about one id.
type Reservation struct {
	ID     string
	Status Status
	// Token holds the id when Status is Reserved; it is zero otherwise.
	Token Token
}

// Errors of a Window.
var (
	// ErrNotHeld means the token does not hold the id: its lease expired
	// and another holder reserved it, it was released, or it was
	// confirmed under another token. Nothing was changed.
	ErrNotHeld = errors.New("window: id not held by this token")

	// ErrNoID means the id is empty.
	ErrNoID = errors.New("window: empty id")

	// ErrFull means a Memory holds its maximum number of ids: it reserves
	// nothing more until some expire. Have the message delivered again
	// later.
	ErrFull = errors.New("window: full")
)

// BatchError lists the items of a batch Confirm or Release whose token did
// not hold their id. It matches ErrNotHeld.
type BatchError struct {
	// NotHeld are the indexes, in the batch, of the items not held.
	NotHeld []int
}

func (e *BatchError) Error() string {
	return "window: " + strconv.Itoa(len(e.NotHeld)) + " ids of the batch not held by their tokens"
}

// Is reports whether target is ErrNotHeld.
func (e *BatchError) Is(target error) bool { return target == ErrNotHeld }

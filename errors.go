package idem

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrInFlight means another call holds the key right now. It is
	// returned at once, without waiting. The concrete error is an
	// *InFlightError that carries a retry hint.
	ErrInFlight = errors.New("idem: key is in flight")

	// ErrMismatch means the key was already used with a different request
	// fingerprint. The work was not run and nothing was replayed.
	ErrMismatch = errors.New("idem: key reused with a different request")

	// ErrInvalidKey means the key breaks the key rules: 1 to 255 visible
	// ASCII characters.
	ErrInvalidKey = errors.New("idem: invalid idempotency key")

	// ErrUnavailable means the store could not be reached or failed. The
	// work's transaction, if any, was rolled back and nothing was
	// recorded; the call may be retried later.
	ErrUnavailable = errors.New("idem: store unavailable")

	// ErrConflict is returned by a store's Tx.Commit when the unique
	// constraint on (scope, key) rejected the record. The store has rolled
	// the transaction back. Guard resolves it by reading the record again;
	// callers of Guard never see it.
	ErrConflict = errors.New("idem: record already exists")
)

// InFlightError is the error returned when another call holds the key. It
// matches ErrInFlight with errors.Is.
type InFlightError struct {
	// RetryAfter is how long the caller should wait before retrying.
	RetryAfter time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("idem: key is in flight; retry after %s", e.RetryAfter)
}

// Is reports whether target is ErrInFlight.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// unavailable wraps a store error so that it matches ErrUnavailable and still
// unwraps to the store's own error.
func unavailable(op string, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

// ErrNotFound is returned by Inspector.Lookup when no record exists.
var ErrNotFound = errors.New("idem: record not found")

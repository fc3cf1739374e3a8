package idem

import (
	"context"
	"time"
)

// Store is the contract an atomic-mode storage backend keeps. A Store is
// safe for concurrent use by multiple goroutines.
//
// Begin opens the transaction in which the work for one key runs:
//
//  1. It takes an exclusive lock on (p.Scope, p.Key) that belongs to the
//     transaction, with a try-lock: if another transaction holds it, Begin
//     returns an error matching ErrInFlight at once, holding nothing. It
//     never waits for the key's holder. (A store may lock by a hash of the
//     key; a collision then costs a spurious ErrInFlight, never a wrong
//     answer.)
//  2. Holding the lock, it reads the record for (p.Scope, p.Key). The read
//     must see every record committed before the lock was granted.
//  3. If a record exists and has not expired at p.Now, Begin ends the
//     transaction and returns the record with a nil Tx. A store may also
//     return a live record found without taking the lock, since a
//     committed live record is final.
//  4. Otherwise it returns a nil record and the open Tx, still holding the
//     lock. The caller must end it with Commit or Rollback.
//
// Any other failure returns an error (stores should wrap connection and
// server failures so that they match ErrUnavailable) and holds nothing.
//
// Uniqueness of (scope, key) must be enforced by the storage itself (a
// unique constraint), not by the lock alone.
//
// Guard passes only values a store can keep in text columns and indexes:
// scopes of at most 255 bytes of valid UTF-8 without control characters
// (see StoredScope), keys of 1 to 255 visible ASCII characters, fingerprints of
// valid UTF-8 without control characters, header names of valid UTF-8 without control
// characters and header values without NUL, and a Status that fits in 32
// bits.
type Store interface {
	Begin(ctx context.Context, p *BeginParams) (*Record, Tx, error)
}

// BeginParams are the arguments of Store.Begin.
type BeginParams struct {
	Scope string
	Key   string
	// Now is the time against which expiry is checked. Stores never read
	// the clock.
	Now time.Time
}

// Tx is one open atomic-mode transaction that holds the lock of one key.
// A Tx is used by one goroutine at a time.
type Tx interface {
	// Handle returns the driver's transaction, through which the caller's
	// work writes its effect (for example *sql.Tx or pgx.Tx). Store
	// packages offer a typed accessor.
	Handle() any

	// Commit writes p.Record and commits the transaction, so that the
	// record and the caller's effect become visible together or not at
	// all. An expired record with the same (scope, key) is replaced; a
	// live one is never overwritten: the insert then fails, the store
	// rolls back and Commit returns an error matching ErrConflict. On
	// any error the transaction is rolled back and the lock released.
	Commit(ctx context.Context, p *CommitParams) error

	// Rollback discards the transaction, its effect included, and
	// releases the lock. It is safe to call after Commit or a previous
	// Rollback, where it does nothing and returns nil.
	Rollback(ctx context.Context) error
}

// CommitParams are the arguments of Tx.Commit.
type CommitParams struct {
	// Record is written with State StateCompleted.
	Record *Record
	// Now is the current time; a store replaces an existing record with
	// the same key only if it has expired at Now.
	Now time.Time
}

// Inspector is implemented by stores that can read a record by its key
// outside any transaction, expired or not. Tools (idem inspect) and tests
// use it.
type Inspector interface {
	// Lookup returns the record for (p.Scope, p.Key), whether or not it has
	// expired, or an error matching ErrNotFound.
	Lookup(ctx context.Context, p *LookupParams) (*Record, error)
}

// LookupParams are the arguments of Inspector.Lookup.
type LookupParams struct {
	Scope string
	Key   string
}

// ExpiredDeleter is implemented by stores whose expired records can be
// deleted in batches. Sweeper drives it.
type ExpiredDeleter interface {
	// DeleteExpired deletes at most p.Limit records that have expired at
	// p.Now and returns how many it deleted. It never deletes a live
	// record, and each call is short so that it does not hold up the
	// hot path.
	DeleteExpired(ctx context.Context, p *DeleteExpiredParams) (int, error)
}

// DeleteExpiredParams are the arguments of ExpiredDeleter.DeleteExpired.
type DeleteExpiredParams struct {
	Now   time.Time
	Limit int
}

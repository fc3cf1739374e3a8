package idem

import (
	"context"
	"errors"
	"time"
)

// ErrFenced means a leased write was refused because the writer's lease is
// no longer current: another holder has claimed the record since (its token
// is newer), or the record is no longer pending. Nothing was written. The
// holder must stop: its successor owns the work.
var ErrFenced = errors.New("idem: lease lost (fenced by a newer holder)")

// LeasedStore is the contract a leased-mode storage backend keeps (see
// docs/DESIGN.md#leased-mode). Leased mode is for work whose effects live
// outside the store's database, so the claim must commit before the work
// runs: as a pending record with a lease and a fencing token. A LeasedStore
// is safe for concurrent use by multiple goroutines and processes.
//
// Every write of a holder (Heartbeat, SaveStep, Complete, Release and a
// step transaction) carries its Lease and is fenced: it applies only if the
// record is pending and its token is still p.Lease.Token, atomically with
// that check; otherwise it writes nothing and returns an error matching
// ErrFenced. Stores never read the clock: the time comes in the params.
// Connection and server failures should match ErrUnavailable.
//
// Guard passes a LeasedStore the same values it passes a Store (see Store).
type LeasedStore interface {
	// Claim reads the record for (p.Scope, p.Key) and claims it if it
	// may, atomically:
	//
	//   - no record, or a completed record that has expired at p.Now: a
	//     new pending record is written (replacing the old one and its
	//     steps) with Attempts 1, TTL p.TTL and a token greater than any
	//     the key had before, even if the old record was deleted (stores
	//     use p.Now.UnixMicro(), or the old token plus one if that is
	//     larger);
	//   - a pending record whose lease has ended (LeaseUntil <= p.Now) and
	//     whose fingerprint is p.Fingerprint: it is taken over, its token
	//     plus one, Attempts plus one, keeping its TTL (not p.TTL);
	//   - anything else (a live completed record, a pending record under a
	//     live lease, or with another fingerprint) is returned unclaimed.
	//
	// A claimed record gets LeaseUntil = p.Now + p.Lease, and the returned
	// Claim holds its steps in the order they were saved. Of two
	// concurrent claims of one key, at most one succeeds.
	Claim(ctx context.Context, p *ClaimParams) (*Claim, error)

	// Heartbeat extends the lease to p.Now + p.Duration (fenced).
	Heartbeat(ctx context.Context, p *HeartbeatParams) error

	// SaveStep records a recovery point (fenced): step p.Name with
	// p.Output. Saving a name that is already saved replaces its output.
	SaveStep(ctx context.Context, p *SaveStepParams) error

	// Complete makes the record completed with p.Result, expiring at
	// p.ExpiresAt (fenced). Its steps may be deleted.
	Complete(ctx context.Context, p *CompleteParams) error

	// Release ends the lease without completing the record (fenced): the
	// record stays pending with LeaseUntil = p.RetryAt and LastError =
	// p.Error, so that it may be claimed again from p.RetryAt on.
	Release(ctx context.Context, p *ReleaseParams) error

	// Abandoned returns at most p.Limit pending records whose lease has
	// ended at p.Now, the longest ended first.
	Abandoned(ctx context.Context, p *AbandonedParams) ([]*Record, error)
}

// LeasedTxStore is implemented by leased stores that keep records in a
// database where the work can also write: a local step then commits its
// writes and its recovery point in one transaction, fenced.
type LeasedTxStore interface {
	LeasedStore

	// BeginStep opens a transaction in which step p.Name writes its
	// effect. It locks the record so that no claim can take it over while
	// the step runs, and returns an error matching ErrFenced (holding
	// nothing) if p.Lease is not current. The caller ends it with Commit
	// or Rollback.
	BeginStep(ctx context.Context, p *BeginStepParams) (StepTx, error)
}

// StepTx is one open local-step transaction. It is used by one goroutine.
type StepTx interface {
	// Handle returns the driver's transaction (as Tx.Handle does).
	Handle() any
	// Commit records the step with output and commits, so that the step's
	// writes and its recovery point become visible together or not at
	// all. On error the transaction is rolled back.
	Commit(ctx context.Context, output []byte) error
	// Rollback discards the transaction. It is safe after Commit.
	Rollback(ctx context.Context) error
}

// Lease identifies one holder of a pending record.
type Lease struct {
	Scope string
	Key   string
	Token int64
}

// Step is one recovery point: a named step and its output.
type Step struct {
	Name   string
	Output []byte
}

// Claim is the answer of LeasedStore.Claim.
type Claim struct {
	// Record is the record as it is after the call.
	Record *Record
	// Claimed reports whether the caller now holds the record, with Lease.
	Claimed bool
	Lease   Lease
	// Steps are the recovery points saved so far, in order, if Claimed.
	Steps []Step
}

// ClaimParams are the arguments of LeasedStore.Claim.
type ClaimParams struct {
	Scope       string
	Key         string
	Fingerprint string
	// Kind and Input are written on a new record (see Record.Kind).
	Kind  string
	Input []byte
	// TTL is written on a new record (see Record.TTL): how long it is kept
	// once completed, whoever completes it. A takeover keeps the record's
	// own. Stores keep it to the microsecond at least.
	TTL time.Duration
	Now time.Time
	// Lease is the length of the lease; it must be positive.
	Lease time.Duration
}

// HeartbeatParams are the arguments of LeasedStore.Heartbeat.
type HeartbeatParams struct {
	Lease    Lease
	Now      time.Time
	Duration time.Duration
}

// SaveStepParams are the arguments of LeasedStore.SaveStep.
type SaveStepParams struct {
	Lease  Lease
	Name   string
	Output []byte
	Now    time.Time
}

// CompleteParams are the arguments of LeasedStore.Complete.
type CompleteParams struct {
	Lease     Lease
	Result    Result
	Now       time.Time
	ExpiresAt time.Time
}

// ReleaseParams are the arguments of LeasedStore.Release.
type ReleaseParams struct {
	Lease   Lease
	Now     time.Time
	RetryAt time.Time
	Error   string
}

// AbandonedParams are the arguments of LeasedStore.Abandoned.
type AbandonedParams struct {
	Now   time.Time
	Limit int
}

// BeginStepParams are the arguments of LeasedTxStore.BeginStep.
type BeginStepParams struct {
	Lease Lease
	Name  string
	Now   time.Time
}

package idemclient

import (
	"context"
	"time"
)

// Journal persists intents so that they survive a crash or a restart of the
// application (rule C3). Client.Do saves an intent before its first attempt
// and marks it resolved once it has a final answer; Client.Resume carries
// out the pending ones with their original keys.
//
// The contract:
//
//   - Save makes the intent durable before it returns: after a crash of the
//     process at any later point, Pending lists it (unless it was marked
//     resolved). Saving a key again replaces the stored intent and makes it
//     pending again. A failed Save leaves either the old state or the new,
//     never a torn intent.
//   - Pending returns the pending intents, oldest CreatedAt first. An entry
//     it cannot read is never silently skipped (a lost intent is the
//     failure the journal exists to prevent), nor does it hide the others:
//     Pending returns the intents it could read together with an error
//     matching ErrUnreadableIntent that names each bad entry. Any other
//     error (the store itself failed) comes with no intents.
//   - MarkResolved records that the intent has a final answer (p.Status, 0
//     when the application gave it up) at p.Now; it is no longer pending.
//     A key the journal does not hold is an error matching ErrNotFound.
//   - Prune deletes resolved intents resolved before p.Before and returns
//     how many it deleted. It never deletes a pending intent.
//
// Implementations are safe for concurrent use and never read the clock: the
// times come in the params.
type Journal interface {
	Save(ctx context.Context, in *Intent) error
	Pending(ctx context.Context) ([]*Intent, error)
	MarkResolved(ctx context.Context, p *MarkResolvedParams) error
	Prune(ctx context.Context, p *PruneParams) (int, error)
}

// MarkResolvedParams are the arguments of Journal.MarkResolved.
type MarkResolvedParams struct {
	// Key names the intent.
	Key string
	// Status is the final HTTP status, or 0 for an intent the application
	// abandoned.
	Status int
	// Now is the time of resolution.
	Now time.Time
}

// PruneParams are the arguments of Journal.Prune.
type PruneParams struct {
	// Before: intents resolved strictly before it are deleted.
	Before time.Time
}

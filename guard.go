package idem

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Guard runs work at most once per (scope, key) and replays its result. It is
// safe for concurrent use; create one per store and share it.
type Guard struct {
	store Store
	cfg   Config

	// The in-process shortcuts (docs/DESIGN.md#in-process): nil when off.
	cache  *replayCache
	claims *localClaims
	epoch  atomic.Uint64 // of the replay cache: see storeFailed
	guardCounters
}

// New returns a Guard over store. A nil cfg means defaults.
func New(store Store, cfg *Config) (*Guard, error) {
	if store == nil {
		return nil, errors.New("idem: New: store is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Guard{store: store, cfg: c}
	if c.ReplayCacheBytes > 0 {
		g.cache = newReplayCache(c.ReplayCacheBytes)
	}
	if !c.DisableLocalInFlight {
		g.claims = &localClaims{}
	}
	return g, nil
}

// Store returns the store the guard drives.
func (g *Guard) Store() Store { return g.store }

// Request names one idempotent call.
type Request struct {
	// Scope is the principal or tenant the key belongs to (plus anything
	// else the operator configures). The same key in two scopes names two
	// independent calls, and one scope never receives another's result.
	// Any string is accepted: records are stored under StoredScope(Scope),
	// which is Scope itself when it is short, printable UTF-8, and a digest
	// otherwise.
	Scope string

	// Key is the client's idempotency key; see ValidateKey.
	Key string

	// Fingerprint identifies the request's content (see NewFingerprint).
	// A retry whose fingerprint differs from the recorded one fails with
	// ErrMismatch. A fingerprint that StoredScope would not keep as it is,
	// whatever its length, is stored as a digest.
	Fingerprint string

	// TTL overrides Config.TTL for this call when positive.
	TTL time.Duration

	// Wait overrides Config.Wait for this call when positive: how long it
	// waits for a concurrent duplicate to end before it is refused with
	// ErrInFlight. A negative Wait means no wait, whatever Config.Wait.
	Wait time.Duration
}

// Work is the unit of work Guard.Do runs. ctx carries the store's
// transaction (see TxFrom and the store's typed accessor); the work must
// write its effect through that transaction so that the effect and the
// recorded result commit together. Returning an error rolls everything back
// and records nothing; so does a panic, which Guard.Do re-raises, and so
// does a Result that cannot be recorded (a Status beyond 32 bits). See
// Result.Header for what is recorded of the headers.
type Work func(ctx context.Context) (Result, error)

// commitTimeout bounds the commit that follows a successful work, which runs
// detached from the caller's cancellation.
const commitTimeout = 30 * time.Second

// Do runs work once for req and records its result in the same transaction
// as the work's effect. It returns the result and whether it was replayed
// from an earlier execution. See the package documentation for the list of
// outcomes.
//
// A retry of a record this Guard has committed or read is answered from
// memory, and a duplicate of a key it is running is refused with
// ErrInFlight, both without a store call (Config.ReplayCacheBytes,
// Config.DisableLocalInFlight, docs/DESIGN.md#in-process).
//
// ctx bounds the whole call except the final commit: once the work has
// returned without error, its effect and result are committed even if ctx
// has been cancelled meanwhile (within 30 seconds), so that a caller who
// gave up gets a replay when it retries.
func (g *Guard) Do(ctx context.Context, req Request, work Work) (res Result, replayed bool, err error) {
	if err := ValidateKey(req.Key); err != nil {
		return Result{}, false, err
	}
	if req.TTL < 0 {
		return Result{}, false, fmt.Errorf("idem: Request.TTL must not be negative, got %s", req.TTL)
	}
	if work == nil {
		return Result{}, false, errors.New("idem: Do: work is nil")
	}
	// The store only ever sees forms it can keep (see stored_form.go).
	req.Scope = StoredScope(req.Scope)
	req.Fingerprint = storedFingerprint(req.Fingerprint)
	if wait := g.waitBound(req); wait > 0 {
		return g.doWaiting(ctx, req, work, wait)
	}
	res, replayed, _, err = g.attempt(ctx, req, work, false)
	return res, replayed, err
}

// attempt runs one try of Do for a checked req. When the Guard itself
// refuses the call in flight, err is an *InFlightError and refused is
// non-nil; refused.released, when wait is set and this Guard is running
// the key, is closed when that run ends.
func (g *Guard) attempt(ctx context.Context, req Request, work Work, wait bool) (res Result, replayed bool, refused *refusal, err error) {
	now := g.cfg.Now()
	epoch := g.epoch.Load()
	if res, replayed, done, released, err := g.inProcess(ctx, req, now, wait); done {
		if released != nil || isInFlight(err) {
			refused = &refusal{released: released}
		}
		return res, replayed, refused, err
	}
	if g.claims != nil {
		defer g.claims.release(slotKey{req.Scope, req.Key})
	}
	rec, tx, err := g.store.Begin(ctx, &BeginParams{Scope: req.Scope, Key: req.Key, Now: now})
	if err != nil {
		err = g.beginError(ctx, err)
		return Result{}, false, refusedIf(err), err
	}
	if rec != nil {
		res, replayed, err = g.replay(rec, req, epoch, now)
		return res, replayed, refusedIf(err), err
	}

	done := false
	defer func() {
		if !done {
			// A panic in the work: roll back, then let it go on.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	res, err = work(WithTx(ctx, tx))
	if err == nil {
		res, err = storableResult(res)
	}
	if err != nil {
		done = true
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return Result{}, false, nil, err
	}
	ttl := g.cfg.TTL
	if req.TTL > 0 {
		ttl = req.TTL
	}
	now = g.cfg.Now()
	rec = &Record{
		Scope:       req.Scope,
		Key:         req.Key,
		Fingerprint: req.Fingerprint,
		State:       StateCompleted,
		Result:      res,
		CreatedAt:   now,
		ExpiresAt:   now.Add(ttl),
	}
	// The work has succeeded, so its effect is in the transaction: commit it
	// even if ctx is cancelled now (a client that gave up still retries,
	// and a recorded result answers that retry with a replay instead of a
	// second execution). commitTimeout bounds a database that hangs.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	err = tx.Commit(cctx, &CommitParams{Record: rec, Now: now})
	cancel()
	done = true
	if err == nil {
		g.remember(rec, epoch, now)
		return res, false, nil, nil
	}
	_ = tx.Rollback(context.WithoutCancel(ctx))
	if errors.Is(err, ErrConflict) {
		res, replayed, err = g.resolveConflict(ctx, req, epoch)
		return res, replayed, refusedIf(err), err
	}
	g.epoch.Add(1) // the store failed (see storeFailed); cctx is not the caller's
	return Result{}, false, nil, unavailable("commit", err)
}

// resolveConflict answers a call whose insert lost to a record committed by
// another transaction: the work's effect was rolled back, and the call is
// answered from that record.
func (g *Guard) resolveConflict(ctx context.Context, req Request, epoch uint64) (Result, bool, error) {
	now := g.cfg.Now()
	rec, tx, err := g.store.Begin(ctx, &BeginParams{Scope: req.Scope, Key: req.Key, Now: now})
	if err != nil {
		return Result{}, false, g.beginError(ctx, err)
	}
	if rec != nil {
		return g.replay(rec, req, epoch, now)
	}
	// The winner's record is gone again (expired in between): let the
	// client retry rather than run the work a second time in this call.
	_ = tx.Rollback(context.WithoutCancel(ctx))
	return Result{}, false, &InFlightError{RetryAfter: g.cfg.InFlightRetryAfter}
}

func (g *Guard) beginError(ctx context.Context, err error) error {
	if errors.Is(err, ErrInFlight) {
		var ife *InFlightError
		if errors.As(err, &ife) {
			return ife
		}
		return &InFlightError{RetryAfter: g.cfg.InFlightRetryAfter}
	}
	g.storeFailed(ctx)
	return unavailable("begin", err)
}

func (g *Guard) replay(rec *Record, req Request, epoch uint64, at time.Time) (Result, bool, error) {
	g.remember(rec, epoch, at)
	if rec.Fingerprint != req.Fingerprint {
		return Result{}, false, ErrMismatch
	}
	if rec.State == StatePending {
		// A leased claim of the same key (a route that changed modes): it
		// is in flight, not a result.
		return Result{}, false, &InFlightError{RetryAfter: g.cfg.InFlightRetryAfter}
	}
	return rec.Result, true, nil
}

package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"
)

// LeasedConfig configures a Leased. The zero value, and a nil *LeasedConfig,
// mean defaults.
type LeasedConfig struct {
	// Lease is how long a claim holds a key without a heartbeat. A crashed
	// holder's work may be taken over this long after its last heartbeat.
	// Defaults to 30 seconds.
	Lease time.Duration

	// Heartbeat is how often a running work's lease is extended. It must be
	// shorter than Lease. Defaults to a third of Lease.
	Heartbeat time.Duration

	// TTL is how long a completed record is kept and replayed. A
	// LeasedRequest may override it. The TTL of a call is written on its
	// record when it is first claimed and kept by whoever completes it (a
	// retry that takes it over, a Completer); this one applies to a
	// record that carries none. Defaults to 24 hours.
	TTL time.Duration

	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

func (c *LeasedConfig) withDefaults() (LeasedConfig, error) {
	var out LeasedConfig
	if c != nil {
		out = *c
	}
	switch {
	case out.Lease < 0:
		return out, fmt.Errorf("idem: LeasedConfig.Lease must not be negative, got %s", out.Lease)
	case out.Heartbeat < 0:
		return out, fmt.Errorf("idem: LeasedConfig.Heartbeat must not be negative, got %s", out.Heartbeat)
	case out.TTL < 0:
		return out, fmt.Errorf("idem: LeasedConfig.TTL must not be negative, got %s", out.TTL)
	}
	if out.Lease == 0 {
		out.Lease = 30 * time.Second
	}
	if out.Heartbeat == 0 {
		out.Heartbeat = out.Lease / 3
	}
	if out.Heartbeat >= out.Lease {
		return out, fmt.Errorf("idem: LeasedConfig.Heartbeat (%s) must be shorter than Lease (%s)", out.Heartbeat, out.Lease)
	}
	if out.TTL == 0 {
		out.TTL = DefaultTTL
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out, nil
}

// Leased runs work whose effects live outside the store's database at most
// once per (scope, key) to completion, resuming it from its last recovery
// point after a crash (leased mode; see docs/DESIGN.md#leased-mode). It is
// safe for concurrent use; create one per store and share it.
type Leased struct {
	store LeasedStore
	cfg   LeasedConfig

	mu    sync.RWMutex
	kinds map[string]LeasedWork
}

// LeasedWork is the work Leased.Do runs. run gives it its recovery points
// and derived keys (see Run); run is also in ctx (RunFrom). ctx is
// cancelled, with a cause matching ErrFenced, when the lease is lost; the
// work should then stop, as none of its writes through run will apply.
//
// Returning a Result completes the record with it: a final answer, replayed
// to every retry. Returning an error (or panicking) releases the record
// with its recovery points kept, for a retry or the completer to resume.
type LeasedWork func(ctx context.Context, run *Run) (Result, error)

// LeasedRequest names one leased call.
type LeasedRequest struct {
	// Scope, Key and Fingerprint are as in Request.
	Scope       string
	Key         string
	Fingerprint string
	// TTL overrides LeasedConfig.TTL for this call when positive. It is
	// written on the record at its first claim (Record.TTL): a takeover
	// by a retry or a Completer completes the record with it, whatever
	// their own TTL.
	TTL time.Duration
	// Kind names the work registered with Leased.Register that a completer
	// runs to finish this call if it is abandoned; Input is what that work
	// reads (Run.Input). Without a Kind the call can be finished only by a
	// retry of its client.
	Kind  string
	Input []byte
}

// NewLeased returns a Leased over store. A nil cfg means defaults.
func NewLeased(store LeasedStore, cfg *LeasedConfig) (*Leased, error) {
	if store == nil {
		return nil, errors.New("idem: NewLeased: store is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Leased{store: store, cfg: c, kinds: make(map[string]LeasedWork)}, nil
}

// Store returns the store the Leased drives.
func (l *Leased) Store() LeasedStore { return l.store }

// Lease returns the configured lease length.
func (l *Leased) Lease() time.Duration { return l.cfg.Lease }

// Register names work so that a Completer can finish abandoned calls of
// that kind. A kind is 1 to 255 bytes of printable UTF-8; registering it
// twice is an error.
func (l *Leased) Register(kind string, work LeasedWork) error {
	if err := checkName("kind", kind); err != nil {
		return err
	}
	if work == nil {
		return errors.New("idem: Register: work is nil")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.kinds[kind]; ok {
		return fmt.Errorf("idem: Register: kind %q is already registered", kind)
	}
	l.kinds[kind] = work
	return nil
}

func (l *Leased) work(kind string) LeasedWork {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.kinds[kind]
}

// checkName validates a kind or a step name: what every store keeps as text.
func checkName(what, s string) error {
	if s == "" || len(s) > 255 || !utf8.ValidString(s) || StoredScope(s) != s {
		return fmt.Errorf("idem: invalid %s %q: 1 to 255 bytes of printable UTF-8", what, truncateUTF8(s, 64))
	}
	return nil
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Do runs work for req unless it has completed already, and returns its
// result and whether it was replayed:
//
//   - a completed record with the same fingerprint is replayed;
//   - one with another fingerprint fails with ErrMismatch;
//   - a pending record under a live lease fails with an *InFlightError
//     whose RetryAfter is what is left of the lease (at least a second);
//   - otherwise the call claims the key (taking over an abandoned claim)
//     and runs work, resuming after its last recovery point.
//
// If the lease is lost while work runs, Do returns an error matching
// ErrFenced and records nothing. If work fails, the error is returned as
// it is and the record is released for a retry. A store failure matches
// ErrUnavailable.
func (l *Leased) Do(ctx context.Context, req LeasedRequest, work LeasedWork) (Result, bool, error) {
	if err := ValidateKey(req.Key); err != nil {
		return Result{}, false, err
	}
	if req.TTL < 0 {
		return Result{}, false, fmt.Errorf("idem: LeasedRequest.TTL must not be negative, got %s", req.TTL)
	}
	if req.Kind != "" {
		if err := checkName("kind", req.Kind); err != nil {
			return Result{}, false, err
		}
	}
	if work == nil {
		return Result{}, false, errors.New("idem: Do: work is nil")
	}
	req.Scope = StoredScope(req.Scope)
	req.Fingerprint = storedFingerprint(req.Fingerprint)
	ttl := l.cfg.TTL
	if req.TTL > 0 {
		ttl = req.TTL
	}
	now := l.cfg.Now()
	claim, err := l.store.Claim(ctx, &ClaimParams{
		Scope: req.Scope, Key: req.Key, Fingerprint: req.Fingerprint,
		Kind: req.Kind, Input: req.Input, TTL: ttl, Now: now, Lease: l.cfg.Lease,
	})
	if err != nil {
		return Result{}, false, unavailable("claim", err)
	}
	if !claim.Claimed {
		return l.answer(claim.Record, req.Fingerprint, now)
	}
	res, err := l.execute(ctx, claim, recordTTL(claim.Record, ttl), work, 0, true)
	return res, false, err
}

// recordTTL is the TTL a claimed record completes with: the one its first
// claim wrote, so that a takeover or a completer keeps the call's TTL, or
// fallback for a record that has none (claimed before stores kept it).
func recordTTL(rec *Record, fallback time.Duration) time.Duration {
	if rec.TTL > 0 {
		return rec.TTL
	}
	return fallback
}

// answer answers a call that found the key held or completed.
func (l *Leased) answer(rec *Record, fingerprint string, now time.Time) (Result, bool, error) {
	if rec.Fingerprint != fingerprint {
		return Result{}, false, ErrMismatch
	}
	if rec.State == StateCompleted {
		return rec.Result, true, nil
	}
	return Result{}, false, &InFlightError{RetryAfter: retryAfter(rec.LeaseUntil.Sub(now))}
}

// retryAfter rounds what is left of a lease up to whole seconds, at least 1.
func retryAfter(left time.Duration) time.Duration {
	if left <= time.Second {
		return time.Second
	}
	return (left + time.Second - 1).Truncate(time.Second)
}

// execute runs work under claim with a heartbeat, then completes or
// releases the record. A failed attempt may be claimed again after
// backoff. With rethrow, a panic in work is re-raised after the release.
func (l *Leased) execute(ctx context.Context, claim *Claim, ttl time.Duration, work LeasedWork, backoff time.Duration, rethrow bool) (res Result, err error) {
	run := newRun(l, claim)
	wctx, cancel := context.WithCancelCause(WithRun(ctx, run))
	hbDone := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(hbDone)
		l.heartbeat(wctx, claim.Lease, stop, cancel)
	}()
	finish := func() {
		close(stop)
		<-hbDone
	}

	panicked := true
	defer func() {
		if !panicked {
			return
		}
		p := recover()
		finish()
		cancel(nil)
		l.release(ctx, claim, fmt.Sprintf("panic: %v", p), backoff)
		if rethrow {
			panic(p)
		}
		res, err = Result{}, fmt.Errorf("idem: work panicked: %v", p)
	}()
	res, err = work(wctx, run)
	panicked = false
	finish()
	lost := context.Cause(wctx)
	cancel(nil)
	if !errors.Is(lost, ErrFenced) {
		// A step refused by the store: the lease is lost even if the work
		// went on to answer (say, a 5xx) before the heartbeat noticed.
		lost = run.lost()
	}
	if lost != nil {
		return Result{}, lost
	}
	if err == nil {
		res, err = storableResult(res)
	}
	if err != nil {
		if !errors.Is(err, ErrFenced) {
			l.release(ctx, claim, err.Error(), backoff)
		}
		return Result{}, err
	}
	now := l.cfg.Now()
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer ccancel()
	err = l.store.Complete(cctx, &CompleteParams{Lease: claim.Lease, Result: res, Now: now, ExpiresAt: now.Add(ttl)})
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, ErrFenced):
		return Result{}, err
	default:
		return Result{}, unavailable("complete", err)
	}
}

// release ends a failed attempt's lease, claimable again after backoff; a
// failure here only delays the next claim until the lease ends.
func (l *Leased) release(ctx context.Context, claim *Claim, msg string, backoff time.Duration) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	now := l.cfg.Now()
	_ = l.store.Release(cctx, &ReleaseParams{
		Lease: claim.Lease, Now: now, RetryAt: now.Add(backoff),
		Error: truncateUTF8(msg, 1000),
	})
}

// heartbeat extends the lease until stop is closed. It cancels the work
// with a cause matching ErrFenced when the store refuses the lease, or when
// the lease runs out while heartbeats fail.
func (l *Leased) heartbeat(ctx context.Context, lease Lease, stop <-chan struct{}, cancel context.CancelCauseFunc) {
	until := l.cfg.Now().Add(l.cfg.Lease)
	t := time.NewTicker(l.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := l.cfg.Now()
		hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Heartbeat)
		err := l.store.Heartbeat(hctx, &HeartbeatParams{Lease: lease, Now: now, Duration: l.cfg.Lease})
		hcancel()
		switch {
		case err == nil:
			until = now.Add(l.cfg.Lease)
		case errors.Is(err, ErrFenced):
			cancel(fmt.Errorf("%w: heartbeat refused", ErrFenced))
			return
		case !l.cfg.Now().Before(until):
			cancel(fmt.Errorf("%w: the lease ran out while heartbeats failed: %w", ErrFenced, err))
			return
		}
	}
}

package idem

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Run is one execution of a leased work: the holder's lease, the recovery
// points saved by earlier executions, and the keys for downstream calls.
// A Run is safe for concurrent use.
type Run struct {
	leased *Leased
	lease  Lease
	// Attempt counts the claims of the record, this one included: 1 on
	// the first execution, more after a takeover or a retry.
	Attempt int
	// Input is the LeasedRequest's Input.
	Input []byte
	// StartedAt is when the record was first claimed.
	StartedAt time.Time

	mu    sync.Mutex
	steps map[string][]byte
	// fenced is set when a write of this run was refused: the lease is
	// lost, whatever the work returns.
	fenced error
}

func newRun(l *Leased, c *Claim) *Run {
	r := &Run{
		leased: l, lease: c.Lease, Attempt: c.Record.Attempts,
		Input: c.Record.Input, StartedAt: c.Record.CreatedAt,
		steps: make(map[string][]byte, len(c.Steps)),
	}
	for _, s := range c.Steps {
		r.steps[s.Name] = s.Output
	}
	return r
}

type runKey struct{}

// WithRun returns a context that carries run; Leased passes the work such
// a context.
func WithRun(ctx context.Context, run *Run) context.Context {
	return context.WithValue(ctx, runKey{}, run)
}

// RunFrom returns the Run of the leased work ctx belongs to, if any.
func RunFrom(ctx context.Context) (*Run, bool) {
	r, ok := ctx.Value(runKey{}).(*Run)
	return r, ok
}

// Lease returns the lease the run holds.
func (r *Run) Lease() Lease { return r.lease }

// Done returns the output of step name if an execution of this work has
// recorded it.
func (r *Run) Done(name string) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, ok := r.steps[name]
	return slices.Clone(out), ok
}

func (r *Run) done(name string, out []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps[name] = slices.Clone(out)
}

// DerivedKey returns the key to send with step's downstream call: see
// DerivedKey. Every execution of the work gets the same key for a step.
func (r *Run) DerivedKey(step string) string {
	return DerivedKey(r.lease.Scope, r.lease.Key, step)
}

// Step runs fn once as a recovery point named name: if an execution has
// recorded the step, Step returns its output without calling fn; otherwise
// it calls fn and records its output (fenced), even if ctx has been
// cancelled meanwhile, so that the effect fn had is not redone. An error
// from fn is returned as it is and records nothing. A fenced write returns
// an error matching ErrFenced: the work must stop.
//
// fn's effect is outside the store, so a crash between fn's effect and the
// record of the step runs fn again on resumption: give its downstream call
// the step's DerivedKey so that the other side applies it once.
func (r *Run) Step(ctx context.Context, name string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	if err := checkName("step name", name); err != nil {
		return nil, err
	}
	if out, ok := r.Done(name); ok {
		return out, nil
	}
	out, err := fn(ctx)
	if err != nil {
		return nil, err
	}
	l := r.leased
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	err = l.store.SaveStep(cctx, &SaveStepParams{Lease: r.lease, Name: name, Output: out, Now: l.cfg.Now()})
	if err != nil {
		return nil, r.stepError(name, err)
	}
	r.done(name, out)
	return out, nil
}

// LocalStep runs fn once as a recovery point named name, in a transaction
// of the store's own database (the store must implement LeasedTxStore):
// fn's writes and the step's record commit together, fenced, or not at all.
// fn reaches the transaction as atomic work does (TxFrom, or the store's
// typed accessor). If the step is already recorded, LocalStep returns its
// output without calling fn.
func (r *Run) LocalStep(ctx context.Context, name string, fn func(ctx context.Context) ([]byte, error)) (out []byte, err error) {
	if err := checkName("step name", name); err != nil {
		return nil, err
	}
	if out, ok := r.Done(name); ok {
		return out, nil
	}
	l := r.leased
	ts, ok := l.store.(LeasedTxStore)
	if !ok {
		return nil, fmt.Errorf("idem: LocalStep %q: the store (%T) has no local transactions", name, l.store)
	}
	st, err := ts.BeginStep(ctx, &BeginStepParams{Lease: r.lease, Name: name, Now: l.cfg.Now()})
	if err != nil {
		return nil, r.stepError(name, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = st.Rollback(context.WithoutCancel(ctx))
		}
	}()
	out, err = fn(WithTx(ctx, stepTx{st}))
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	committed = true
	if err := st.Commit(cctx, out); err != nil {
		_ = st.Rollback(context.WithoutCancel(ctx))
		return nil, r.stepError(name, err)
	}
	r.done(name, out)
	return out, nil
}

func (r *Run) stepError(name string, err error) error {
	if errors.Is(err, ErrFenced) {
		err = fmt.Errorf("idem: step %q: %w", name, err)
		r.mu.Lock()
		r.fenced = err
		r.mu.Unlock()
		return err
	}
	return unavailable("step "+name, err)
}

// lost returns the error of a write that was fenced, if any.
func (r *Run) lost() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fenced
}

// stepTx shows a local step's transaction to the work as a Tx, so that the
// stores' TxFrom accessors work in a local step. Its Commit refuses:
// LocalStep commits.
type stepTx struct{ st StepTx }

func (t stepTx) Handle() any { return t.st.Handle() }

func (t stepTx) Commit(context.Context, *CommitParams) error {
	return errors.New("idem: a local step's transaction is committed by Run.LocalStep")
}

func (t stepTx) Rollback(ctx context.Context) error { return t.st.Rollback(ctx) }

// DerivedKey returns the key that a leased work sends downstream for step
// of the call (scope, key): "idem_" and 32 lowercase base32 characters of
// a SHA-256 digest of the three, each length-prefixed, so that no two
// triples share a key. It is deterministic, so every execution of a step
// sends the same key, and it reveals neither the scope nor the client's
// key. scope is the stored scope (see StoredScope).
func DerivedKey(scope, key, step string) string {
	h := sha256.New()
	h.Write([]byte("idem derived key v1"))
	var n [binary.MaxVarintLen64]byte
	for _, s := range []string{scope, key, step} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	sum := h.Sum(nil)
	return "idem_" + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:20]))
}

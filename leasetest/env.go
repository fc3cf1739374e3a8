package leasetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/internal/testclock"
)

// env is one test case's store and clock. The store-level cases pass the
// clock's times in the params; stores never read a clock, so nothing in
// them sleeps.
type env struct {
	h        *Harness
	location string
	store    idem.LeasedStore
	clock    *testclock.Clock
}

const (
	// scope is the scope of every key the cases use.
	scope = "s"
	// lease is the lease of the store-level claims.
	lease = time.Minute
	// kind is the Kind of the store-level claims.
	kind = "leasetest"
	// callTTL is the TTL of the store-level claims and of the calls whose
	// TTL a case checks: a week, unlike any engine default.
	callTTL = 7 * 24 * time.Hour
	// peekFingerprint is a fingerprint no case claims with: a Claim with
	// it never takes a record over, so it reads the record unchanged.
	peekFingerprint = "leasetest-peek"
	// far is beyond every lease the store-level cases set.
	far = 1000 * time.Hour
)

func setup(t testing.TB, h *Harness) *env {
	t.Helper()
	e := &env{h: h, location: h.NewLocation(t), clock: testclock.New()}
	e.open(t)
	return e
}

func (e *env) open(t testing.TB) {
	t.Helper()
	e.store = conformance.Open(t, e.h.Open, e.h.Close, e.location)
}

func (e *env) close(t testing.TB) {
	t.Helper()
	conformance.Close(t, e.h.Close, e.store)
}

func (e *env) effects(t testing.TB, name string) int {
	t.Helper()
	return conformance.Effects(t, e.h.CountEffects, e.store, name)
}

// openStep opens the local step name of lease's holder and writes the
// effect name through it; the caller commits or rolls back.
func (e *env) openStep(t testing.TB, lease idem.Lease, name string, now time.Time) idem.StepTx {
	t.Helper()
	st, err := e.txStore(t).BeginStep(context.Background(), &idem.BeginStepParams{Lease: lease, Name: name, Now: now})
	if err != nil {
		t.Fatalf("BeginStep of the current holder: %v", err)
	}
	if err := e.h.Effect(stepCtx(st), name); err != nil {
		_ = st.Rollback(context.Background())
		t.Fatalf("Effect in the step: %v", err)
	}
	return st
}

// txStore returns the store as an idem.LeasedTxStore, and skips the case
// when it is not one or the harness has no Effect.
func (e *env) txStore(t testing.TB) idem.LeasedTxStore {
	t.Helper()
	ts, ok := e.store.(idem.LeasedTxStore)
	if !ok || e.h.Effect == nil {
		t.Skipf("the store (%T) has no local steps, or the harness no Effect", e.store)
	}
	return ts
}

func input(key string) []byte { return []byte("input of " + key) }

func claimParams(key, fingerprint string, now time.Time) *idem.ClaimParams {
	return &idem.ClaimParams{
		Scope: scope, Key: key, Fingerprint: fingerprint,
		Kind: kind, Input: input(key), TTL: callTTL, Now: now, Lease: lease,
	}
}

// claim calls Claim and checks the answer's own consistency: a claimed
// answer holds a pending record whose token is its lease's, an unclaimed
// one the record.
func (e *env) claim(t testing.TB, p *idem.ClaimParams) *idem.Claim {
	t.Helper()
	c, err := e.store.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("Claim(%q, %q) at %v: %v", p.Key, p.Fingerprint, p.Now, err)
	}
	switch {
	case c == nil || c.Record == nil:
		t.Fatalf("Claim(%q) = %+v: an answer always holds the record", p.Key, c)
	case c.Record.Scope != p.Scope || c.Record.Key != p.Key:
		t.Fatalf("Claim(%q, %q) returned the record of (%q, %q)", p.Scope, p.Key, c.Record.Scope, c.Record.Key)
	case c.Claimed && (c.Record.State != idem.StatePending || c.Lease != (idem.Lease{Scope: p.Scope, Key: p.Key, Token: c.Record.Token})):
		t.Fatalf("Claim(%q) claimed: state %q, lease %+v, record token %d; a claimed record is pending and the lease carries its token",
			p.Key, c.Record.State, c.Lease, c.Record.Token)
	}
	return c
}

// mustClaim claims (s, key) with fingerprint at now and fails unless the
// claim succeeded.
func (e *env) mustClaim(t testing.TB, key, fingerprint string, now time.Time) *idem.Claim {
	t.Helper()
	c := e.claim(t, claimParams(key, fingerprint, now))
	if !c.Claimed {
		t.Fatalf("Claim(%q) at %v: not claimed, record %s; want a claim", key, now, describe(c.Record))
	}
	return c
}

// mustNotClaim claims (s, key) with fingerprint at now and fails if the
// claim succeeded. It returns the record.
func (e *env) mustNotClaim(t testing.TB, key, fingerprint string, now time.Time) *idem.Record {
	t.Helper()
	c := e.claim(t, claimParams(key, fingerprint, now))
	if c.Claimed {
		t.Fatalf("Claim(%q, %q) at %v claimed the record (now %s); want it returned unclaimed", key, fingerprint, now, describe(c.Record))
	}
	return c.Record
}

// peek returns the record of (s, key) without changing it: through a
// Claim with a fingerprint no case uses, which the contract answers
// unclaimed for a pending record and for a live completed one.
func (e *env) peek(t testing.TB, key string, now time.Time) *idem.Record {
	t.Helper()
	c := e.claim(t, claimParams(key, peekFingerprint, now))
	if c.Claimed {
		t.Fatalf("Claim(%q) with a new fingerprint at %v claimed the key: there was no live record to read", key, now)
	}
	return c.Record
}

// stepsAtTakeover takes the pending record of (s, key) over at a time past
// every lease, and returns the steps its new holder receives. It changes
// the record, so a case calls it last.
func (e *env) stepsAtTakeover(t testing.TB, key, fingerprint string) []idem.Step {
	t.Helper()
	return e.mustClaim(t, key, fingerprint, e.clock.Now().Add(far)).Steps
}

func (e *env) saveStep(t testing.TB, l idem.Lease, name string, output []byte, now time.Time) {
	t.Helper()
	if err := e.store.SaveStep(context.Background(), &idem.SaveStepParams{Lease: l, Name: name, Output: output, Now: now}); err != nil {
		t.Fatalf("SaveStep(%q) of the current holder: %v", name, err)
	}
}

func (e *env) complete(t testing.TB, l idem.Lease, res idem.Result, now, expiresAt time.Time) {
	t.Helper()
	if err := e.store.Complete(context.Background(), &idem.CompleteParams{Lease: l, Result: res, Now: now, ExpiresAt: expiresAt}); err != nil {
		t.Fatalf("Complete of the current holder: %v", err)
	}
}

// holderWrite is one fenced write of a holder, made with lease l at now.
type holderWrite struct {
	name  string
	write func(ctx context.Context, l idem.Lease, now time.Time) error
}

// holderWrites returns every fenced write of the LeasedStore contract, and
// BeginStep when the store is an idem.LeasedTxStore. Each writes something
// that a case can see: a step named "fenced", the result "fenced", an
// error "fenced", a lease far in the future.
func (e *env) holderWrites() []holderWrite {
	s := e.store
	ws := []holderWrite{
		{"Heartbeat", func(ctx context.Context, l idem.Lease, now time.Time) error {
			return s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: l, Now: now, Duration: far})
		}},
		{"SaveStep", func(ctx context.Context, l idem.Lease, now time.Time) error {
			return s.SaveStep(ctx, &idem.SaveStepParams{Lease: l, Name: "fenced", Output: []byte("fenced"), Now: now})
		}},
		{"SaveStepOfASavedName", func(ctx context.Context, l idem.Lease, now time.Time) error {
			return s.SaveStep(ctx, &idem.SaveStepParams{Lease: l, Name: "saved", Output: []byte("fenced"), Now: now})
		}},
		{"Complete", func(ctx context.Context, l idem.Lease, now time.Time) error {
			return s.Complete(ctx, &idem.CompleteParams{Lease: l, Result: idem.Result{Status: 200, Body: []byte("fenced")}, Now: now, ExpiresAt: now.Add(far)})
		}},
		{"Release", func(ctx context.Context, l idem.Lease, now time.Time) error {
			return s.Release(ctx, &idem.ReleaseParams{Lease: l, Now: now, RetryAt: now.Add(far), Error: "fenced"})
		}},
	}
	if ts, ok := s.(idem.LeasedTxStore); ok {
		ws = append(ws, holderWrite{"BeginStep", func(ctx context.Context, l idem.Lease, now time.Time) error {
			st, err := ts.BeginStep(ctx, &idem.BeginStepParams{Lease: l, Name: "fenced", Now: now})
			if err != nil {
				return err
			}
			// Opened for a stale lease: the case fails on the nil error;
			// try to commit, to show what the store would keep.
			if e.h.Effect != nil {
				if err := e.h.Effect(idem.WithTx(ctx, stepAsTx{st}), "fenced"); err != nil {
					_ = st.Rollback(ctx)
					return fmt.Errorf("BeginStep opened a step for a stale lease (and Effect failed: %v)", err)
				}
			}
			if err := st.Commit(ctx, []byte("fenced")); err != nil {
				_ = st.Rollback(ctx)
				return fmt.Errorf("BeginStep opened a step for a stale lease (its Commit then failed: %w)", err)
			}
			return nil
		}})
	}
	return ws
}

// stepAsTx shows a local step's transaction as an idem.Tx, as Run.LocalStep
// does, so that a store's TxFrom accessor (and so Harness.Effect) reaches
// it. Its Commit refuses: the step commits through StepTx.Commit.
type stepAsTx struct{ st idem.StepTx }

func (t stepAsTx) Handle() any { return t.st.Handle() }
func (t stepAsTx) Commit(context.Context, *idem.CommitParams) error {
	return errors.New("leasetest: a local step commits through StepTx.Commit")
}
func (t stepAsTx) Rollback(ctx context.Context) error { return t.st.Rollback(ctx) }

// stepCtx returns a context that carries st, as a local step's fn gets.
func stepCtx(st idem.StepTx) context.Context {
	return idem.WithTx(context.Background(), stepAsTx{st})
}

// describe formats a record for a failure message.
func describe(r *idem.Record) string {
	if r == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{fingerprint %q, state %q, token %d, lease until %v, attempts %d, kind %q, input %q, last error %q, ttl %v, created %v, expires %v, result %d %v %q}",
		r.Fingerprint, r.State, r.Token, r.LeaseUntil, r.Attempts, r.Kind, r.Input, r.LastError, r.TTL, r.CreatedAt, r.ExpiresAt,
		r.Result.Status, r.Result.Header, r.Result.Body)
}

// sameRecord checks that got is want, field by field.
func sameRecord(t testing.TB, what string, got, want *idem.Record) {
	t.Helper()
	var diffs []string
	add := func(field string, g, w any) { diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.Fingerprint != want.Fingerprint {
		add("Fingerprint", got.Fingerprint, want.Fingerprint)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Token != want.Token {
		add("Token", got.Token, want.Token)
	}
	if !got.LeaseUntil.Equal(want.LeaseUntil) {
		add("LeaseUntil", got.LeaseUntil, want.LeaseUntil)
	}
	if got.Attempts != want.Attempts {
		add("Attempts", got.Attempts, want.Attempts)
	}
	if got.Kind != want.Kind {
		add("Kind", got.Kind, want.Kind)
	}
	if !bytes.Equal(got.Input, want.Input) {
		add("Input", fmt.Sprintf("%q", got.Input), fmt.Sprintf("%q", want.Input))
	}
	if got.LastError != want.LastError {
		add("LastError", got.LastError, want.LastError)
	}
	if got.TTL != want.TTL {
		add("TTL", got.TTL, want.TTL)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		add("CreatedAt", got.CreatedAt, want.CreatedAt)
	}
	if !got.ExpiresAt.Equal(want.ExpiresAt) {
		add("ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	}
	if !sameResult(got.Result, want.Result) {
		add("Result", fmt.Sprintf("%d %v %q", got.Result.Status, got.Result.Header, got.Result.Body),
			fmt.Sprintf("%d %v %q", want.Result.Status, want.Result.Header, want.Result.Body))
	}
	for _, d := range diffs {
		t.Errorf("%s: %s", what, d)
	}
}

// sameResult compares results byte for byte; no headers and an empty
// header map are the same.
func sameResult(got, want idem.Result) bool {
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) {
		return false
	}
	if len(got.Header) == 0 && len(want.Header) == 0 {
		return true
	}
	return maps.EqualFunc(got.Header, want.Header, slices.Equal[[]string])
}

// sameSteps checks that got are the steps want, in order.
func sameSteps(t testing.TB, what string, got, want []idem.Step) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Name == want[i].Name && bytes.Equal(got[i].Output, want[i].Output)
	}
	if !ok {
		t.Errorf("%s: steps = %s, want %s", what, stepList(got), stepList(want))
	}
}

func stepList(steps []idem.Step) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, s := range steps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", s.Name, s.Output)
	}
	b.WriteByte(']')
	return b.String()
}

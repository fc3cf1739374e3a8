package storetest

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

// env is one test case's store, guard and clock.
type env struct {
	h        *Harness
	location string
	store    idem.Store
	guard    *idem.Guard
	clock    *testclock.Clock
}

const testTTL = time.Hour

func setup(t testing.TB, h *Harness) *env {
	t.Helper()
	e := &env{h: h, location: h.NewLocation(t), clock: testclock.New()}
	e.open(t)
	return e
}

func (e *env) open(t testing.TB) {
	t.Helper()
	s := conformance.Open(t, e.h.Open, e.h.Close, e.location)
	// The Guard's in-process shortcuts off: every call reaches the store.
	g, err := idem.New(s, &idem.Config{TTL: testTTL, Now: e.clock.Now, ReplayCacheBytes: -1, DisableLocalInFlight: true})
	if err != nil {
		t.Fatal(err)
	}
	e.store, e.guard = s, g
}

func (e *env) close(t testing.TB) {
	t.Helper()
	conformance.Close(t, e.h.Close, e.store)
}

func (e *env) effects(t testing.TB, name string) int {
	t.Helper()
	return conformance.Effects(t, e.h.CountEffects, e.store, name)
}

// work returns a Work that writes the effect name and returns res, and a
// counter of its runs.
func (e *env) work(name string, res idem.Result) (idem.Work, *conformance.Counter) {
	c := &conformance.Counter{}
	return func(ctx context.Context) (idem.Result, error) {
		c.Add()
		if err := e.h.Effect(ctx, name); err != nil {
			return idem.Result{}, fmt.Errorf("effect: %w", err)
		}
		return res, nil
	}, c
}

// begin calls Begin for (s, key) at now and fails the test unless it
// opens a Tx.
func (e *env) begin(t testing.TB, key string, now time.Time) idem.Tx {
	t.Helper()
	rec, tx, err := e.store.Begin(context.Background(), &idem.BeginParams{Scope: "s", Key: key, Now: now})
	if err != nil || rec != nil || tx == nil {
		if tx != nil {
			_ = tx.Rollback(context.Background())
		}
		t.Fatalf("Begin(%q) at %v: record=%v tx=%v err=%v; want no record and an open Tx", key, now, rec, tx, err)
	}
	return tx
}

// commit begins (s, key) at now and commits rec through the store alone,
// without an effect.
func (e *env) commit(t testing.TB, rec *idem.Record, now time.Time) {
	t.Helper()
	tx := e.begin(t, rec.Key, now)
	if err := tx.Commit(context.Background(), &idem.CommitParams{Record: rec, Now: now}); err != nil {
		t.Fatalf("Commit(%q) at %v: %v", rec.Key, now, err)
	}
}

// lookup returns the stored record of (s, key), nil when there is none,
// and false when the store is not an idem.Inspector.
func (e *env) lookup(t testing.TB, key string) (*idem.Record, bool) {
	t.Helper()
	in, ok := e.store.(idem.Inspector)
	if !ok {
		return nil, false
	}
	rec, err := in.Lookup(context.Background(), &idem.LookupParams{Scope: "s", Key: key})
	switch {
	case errors.Is(err, idem.ErrNotFound):
		return nil, true
	case err != nil:
		t.Fatalf("Lookup(%q): %v", key, err)
	case rec == nil:
		t.Fatalf("Lookup(%q) = nil, nil; want a record or ErrNotFound", key)
	}
	return rec, true
}

// record returns a completed record of (s, key) created at now that lives
// for ttl.
func record(key, fingerprint string, now time.Time, ttl time.Duration) *idem.Record {
	return &idem.Record{
		Scope: "s", Key: key, Fingerprint: fingerprint, State: idem.StateCompleted,
		Result:    idem.Result{Status: 201, Body: []byte(fingerprint)},
		CreatedAt: now, ExpiresAt: now.Add(ttl),
	}
}

func req(scope, key, fp string) idem.Request {
	return idem.Request{Scope: scope, Key: key, Fingerprint: fp}
}

func assertResult(t testing.TB, got, want idem.Result) {
	t.Helper()
	if got.Status != want.Status {
		t.Errorf("status = %d, want %d", got.Status, want.Status)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Errorf("body = %q, want %q", got.Body, want.Body)
	}
	if len(got.Header) != 0 || len(want.Header) != 0 {
		if !maps.EqualFunc(got.Header, want.Header, slices.Equal[[]string]) {
			t.Errorf("header = %v, want %v", got.Header, want.Header)
		}
	}
}

// assertNoRecord checks that (scope, key) has no record, when the store is
// an idem.Inspector.
func assertNoRecord(t testing.TB, e *env, scope, key string) {
	t.Helper()
	in, ok := e.store.(idem.Inspector)
	if !ok {
		return
	}
	rec, err := in.Lookup(context.Background(), &idem.LookupParams{Scope: scope, Key: key})
	if !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup(%q, %q) = %+v, %v; want ErrNotFound", scope, key, rec, err)
	}
}

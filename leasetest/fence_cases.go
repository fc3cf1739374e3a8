package leasetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func staleHolderWritesNothing(t testing.TB, h *Harness) {
	// A holder whose lease was taken over, and a writer with a token that
	// was never issued, try every write; each must be refused and leave
	// the record and its steps as the current holder has them.
	e := setup(t, h)
	now := e.clock.Now()
	stale := e.mustClaim(t, "k", "fp", now)
	e.saveStep(t, stale.Lease, "saved", []byte("before the takeover"), now)
	at := stale.Record.LeaseUntil
	current := e.mustClaim(t, "k", "fp", at)
	wantSteps := []idem.Step{{Name: "saved", Output: []byte("before the takeover")}}

	never := current.Lease
	never.Token += 1000
	for _, l := range []struct {
		who   string
		lease idem.Lease
	}{{"the holder whose lease was taken over", stale.Lease}, {"a writer with a token never issued", never}} {
		for _, w := range e.holderWrites() {
			err := w.write(context.Background(), l.lease, at.Add(time.Second))
			if !errors.Is(err, idem.ErrFenced) {
				t.Errorf("%s of %s: err = %v, want ErrFenced", w.name, l.who, err)
			}
			sameRecord(t, w.name+" of "+l.who+": the record", e.peek(t, "k", at.Add(time.Second)), current.Record)
		}
	}
	if e.h.Effect != nil {
		if n := e.effects(t, "fenced"); n != 0 {
			t.Errorf("effects of a refused local step = %d, want 0", n)
		}
	}
	// The current holder is untouched: it still writes.
	if err := e.store.Heartbeat(context.Background(), &idem.HeartbeatParams{Lease: current.Lease, Now: at, Duration: lease}); err != nil {
		t.Errorf("Heartbeat of the current holder after the refused writes: %v", err)
	}
	sameSteps(t, "the steps after the refused writes", e.stepsAtTakeover(t, "k", "fp"), wantSteps)
}

func writesOnACompletedRecordAreRefused(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	e.saveStep(t, c.Lease, "saved", []byte("x"), now)
	e.complete(t, c.Lease, testResult(), now, now.Add(time.Hour))
	want := e.mustNotClaim(t, "k", "fp", now)
	for _, w := range e.holderWrites() {
		err := w.write(context.Background(), c.Lease, now.Add(time.Second))
		if !errors.Is(err, idem.ErrFenced) {
			t.Errorf("%s by the holder of a record it completed: err = %v, want ErrFenced", w.name, err)
		}
		got := e.mustNotClaim(t, "k", "fp", now.Add(time.Second))
		if got.State != idem.StateCompleted || !sameResult(got.Result, want.Result) || !got.ExpiresAt.Equal(want.ExpiresAt) {
			t.Errorf("after %s: record %s, want it still completed with its result, expiring at %v", w.name, describe(got), want.ExpiresAt)
		}
	}
	if e.h.Effect != nil {
		if n := e.effects(t, "fenced"); n != 0 {
			t.Errorf("effects of a refused local step = %d, want 0", n)
		}
	}
}

func heartbeatExtendsTheLease(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	beat := now.Add(50 * time.Second)
	if err := e.store.Heartbeat(context.Background(), &idem.HeartbeatParams{Lease: c.Lease, Now: beat, Duration: 2 * lease}); err != nil {
		t.Fatalf("Heartbeat of the current holder: %v", err)
	}
	want := *c.Record
	want.LeaseUntil = beat.Add(2 * lease)
	sameRecord(t, "the record after a heartbeat", e.peek(t, "k", beat), &want)
	// Past the first lease, before the extended one: still held.
	e.mustNotClaim(t, "k", "fp", c.Record.LeaseUntil.Add(time.Second))
	e.mustNotClaim(t, "k", "fp", want.LeaseUntil.Add(-time.Millisecond))
	taken := e.mustClaim(t, "k", "fp", want.LeaseUntil)
	if taken.Record.Attempts != 2 {
		t.Errorf("attempts after the takeover = %d, want 2", taken.Record.Attempts)
	}
}

func releaseEndsTheLeaseAndKeepsSteps(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	e.saveStep(t, c.Lease, "a", []byte("1"), now)
	retryAt := now.Add(10 * time.Second)
	if err := e.store.Release(context.Background(), &idem.ReleaseParams{Lease: c.Lease, Now: now.Add(time.Second), RetryAt: retryAt, Error: "provider timed out"}); err != nil {
		t.Fatalf("Release of the current holder: %v", err)
	}
	want := *c.Record
	want.LeaseUntil, want.LastError = retryAt, "provider timed out"
	sameRecord(t, "the released record", e.peek(t, "k", now.Add(time.Second)), &want)
	e.mustNotClaim(t, "k", "fp", retryAt.Add(-time.Millisecond))
	taken := e.mustClaim(t, "k", "fp", retryAt)
	if taken.Record.Attempts != 2 || taken.Record.Token <= c.Record.Token {
		t.Errorf("the claim after the release: attempts %d, token %d; want 2 and above %d", taken.Record.Attempts, taken.Record.Token, c.Record.Token)
	}
	sameSteps(t, "the steps after a release", taken.Steps, []idem.Step{{Name: "a", Output: []byte("1")}})

	// A release with RetryAt = Now (what Leased does when work fails)
	// frees the key at once.
	if err := e.store.Release(context.Background(), &idem.ReleaseParams{Lease: taken.Lease, Now: retryAt, RetryAt: retryAt, Error: "again"}); err != nil {
		t.Fatalf("Release of the current holder: %v", err)
	}
	again := e.mustClaim(t, "k", "fp", retryAt)
	if again.Record.Attempts != 3 {
		t.Errorf("attempts = %d after a claim at RetryAt, want 3", again.Record.Attempts)
	}
}

func fencedErrorsNameNoScopeOrKey(t testing.TB, h *Harness) {
	// A scope may hold a principal derived from a credential, and callers
	// log these errors (the completer, the transports): a refused write's
	// error names neither the scope nor the key.
	const (
		secretScope = "tenant:sk_live_SCOPESECRET"
		secretKey   = "key-sk_live_KEYSECRET-0001"
	)
	e := setup(t, h)
	now := e.clock.Now()
	p := claimParams(secretKey, "fp", now)
	p.Scope = secretScope
	stale := e.claim(t, p)
	if !stale.Claimed {
		t.Fatalf("claim of a new key: not claimed, %s", describe(stale.Record))
	}
	p.Now = stale.Record.LeaseUntil
	if c := e.claim(t, p); !c.Claimed {
		t.Fatalf("takeover at the end of the lease: not claimed, %s", describe(c.Record))
	}
	for _, w := range e.holderWrites() {
		err := w.write(context.Background(), stale.Lease, p.Now)
		switch {
		case !errors.Is(err, idem.ErrFenced):
			t.Errorf("%s of the stale holder: err = %v, want ErrFenced", w.name, err)
		case strings.Contains(err.Error(), "SECRET"):
			t.Errorf("%s of the stale holder: err = %q names the scope or the key; name them by idem.KeyHash", w.name, err)
		}
	}
}

package leasetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Claimers is how many goroutines race for one claim.
const Claimers = 50

func newClaimIsPendingWithALease(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	want := &idem.Record{
		Scope: scope, Key: "k", Fingerprint: "fp", State: idem.StatePending,
		CreatedAt: now, ExpiresAt: idem.PendingExpiresAt,
		Token: c.Record.Token, LeaseUntil: now.Add(lease),
		Kind: kind, Input: input("k"), TTL: callTTL, Attempts: 1,
	}
	sameRecord(t, "the new claim's record", c.Record, want)
	if c.Record.Token < now.UnixMicro() {
		t.Errorf("token = %d, want at least Now.UnixMicro() = %d", c.Record.Token, now.UnixMicro())
	}
	if len(c.Steps) != 0 {
		t.Errorf("a new claim has steps %s, want none", stepList(c.Steps))
	}
	sameRecord(t, "the stored record", e.peek(t, "k", now), want)
}

func liveLeaseIsNotClaimable(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	first := e.mustClaim(t, "k", "fp", now)
	for _, at := range []time.Duration{0, time.Second, lease - time.Millisecond} {
		rec := e.mustNotClaim(t, "k", "fp", now.Add(at))
		sameRecord(t, "the record returned to a claim under the live lease", rec, first.Record)
	}
}

func endedLeaseIsTakenOverWithAGreaterToken(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	first := e.mustClaim(t, "k", "fp", now)
	// Names out of alphabetical order: the steps come back in the order
	// they were saved.
	saved := []idem.Step{{Name: "zeta", Output: []byte("1")}, {Name: "alpha", Output: []byte("2")}, {Name: "mid", Output: []byte("3")}}
	for _, s := range saved {
		e.saveStep(t, first.Lease, s.Name, s.Output, now)
	}

	prev := first
	at := first.Record.LeaseUntil // a lease has ended at its LeaseUntil
	for attempt := 2; attempt <= 3; attempt++ {
		p := claimParams("k", "fp", at)
		p.Kind, p.Input, p.TTL = "other-kind", []byte("other input"), time.Hour // kept only on a new record
		c := e.claim(t, p)
		if !c.Claimed {
			t.Fatalf("attempt %d: a claim at the end of the lease (%v) was not claimed: %s", attempt, at, describe(c.Record))
		}
		if c.Record.Token <= prev.Record.Token {
			t.Errorf("attempt %d: token %d after a takeover, want greater than the previous %d", attempt, c.Record.Token, prev.Record.Token)
		}
		want := *first.Record
		want.Token, want.Attempts, want.LeaseUntil = c.Record.Token, attempt, at.Add(lease)
		sameRecord(t, "the record taken over", c.Record, &want)
		sameSteps(t, "the steps the new holder receives", c.Steps, saved)
		prev = c
		at = c.Record.LeaseUntil.Add(time.Hour)
	}
}

func anotherFingerprintNeverTakesOver(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	first := e.mustClaim(t, "k", "fp", now)
	e.saveStep(t, first.Lease, "a", []byte("1"), now)
	for _, at := range []time.Time{now, first.Record.LeaseUntil, now.Add(far)} {
		rec := e.mustNotClaim(t, "k", "other-fp", at)
		sameRecord(t, "the record returned to another fingerprint", rec, first.Record)
	}
	sameSteps(t, "the steps after claims with another fingerprint", e.stepsAtTakeover(t, "k", "fp"), []idem.Step{{Name: "a", Output: []byte("1")}})
}

// testResult is a result with several headers and a body of every byte
// value.
func testResult() idem.Result {
	return idem.Result{
		Status: 201,
		Header: map[string][]string{"Location": {"/payouts/1"}, "X-Multi": {"a", "b, c"}, "X-Empty": {""}},
		Body:   allBytes(),
	}
}

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func completedRecordIsReturnedUnclaimed(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	c := e.mustClaim(t, "k", "fp", now)
	doneAt := now.Add(time.Second)
	e.complete(t, c.Lease, testResult(), doneAt, doneAt.Add(time.Hour))
	want := *c.Record
	want.State, want.Result, want.ExpiresAt = idem.StateCompleted, testResult(), doneAt.Add(time.Hour)
	for _, at := range []time.Time{doneAt, c.Record.LeaseUntil.Add(time.Second), doneAt.Add(time.Hour - time.Millisecond)} {
		for _, fp := range []string{"fp", "other-fp"} {
			rec := e.mustNotClaim(t, "k", fp, at)
			// Token, LeaseUntil, Attempts and the rest of a completed
			// record are not part of the contract: check what is.
			if rec.State != idem.StateCompleted || rec.Fingerprint != "fp" || !rec.ExpiresAt.Equal(want.ExpiresAt) {
				t.Errorf("claim at %v with %q: record %s, want completed with fingerprint fp expiring at %v", at, fp, describe(rec), want.ExpiresAt)
			}
			if !sameResult(rec.Result, want.Result) {
				t.Errorf("claim at %v with %q: result %d %v %q, want %d %v %q byte for byte", at, fp,
					rec.Result.Status, rec.Result.Header, rec.Result.Body, want.Result.Status, want.Result.Header, want.Result.Body)
			}
		}
	}
}

func expiredCompletedRecordIsReplaced(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	old := e.mustClaim(t, "k", "fp", now)
	e.saveStep(t, old.Lease, "old-step", []byte("old"), now)
	e.complete(t, old.Lease, testResult(), now, now.Add(time.Hour))

	at := now.Add(time.Hour) // a record has expired at its ExpiresAt
	p := claimParams("k", "new-fp", at)
	p.Kind, p.Input, p.TTL = "new-kind", []byte("new input"), 2*time.Hour
	c := e.claim(t, p)
	if !c.Claimed {
		t.Fatalf("a claim of an expired completed record was not claimed: %s", describe(c.Record))
	}
	if c.Record.Token <= old.Record.Token {
		t.Errorf("token %d of the new record, want greater than the old record's %d", c.Record.Token, old.Record.Token)
	}
	want := &idem.Record{
		Scope: scope, Key: "k", Fingerprint: "new-fp", State: idem.StatePending,
		CreatedAt: at, ExpiresAt: idem.PendingExpiresAt, Token: c.Record.Token, LeaseUntil: at.Add(lease),
		Kind: "new-kind", Input: []byte("new input"), TTL: 2 * time.Hour, Attempts: 1,
	}
	sameRecord(t, "the record that replaced the expired one", c.Record, want)
	sameSteps(t, "the steps of the new record", c.Steps, nil)
	sameSteps(t, "the steps at a takeover of the new record", e.stepsAtTakeover(t, "k", "new-fp"), nil)
}

func replacementTokenGrowsWhenTheClockIsBehind(t testing.TB, h *Harness) {
	// One writer's clock is an hour ahead of the next one's: the token of
	// the record it completed is above the next writer's Now.UnixMicro().
	e := setup(t, h)
	now := e.clock.Now()
	ahead := now.Add(time.Hour)
	old := e.mustClaim(t, "k", "fp", ahead)
	e.complete(t, old.Lease, testResult(), ahead, now.Add(time.Second))
	at := now.Add(2 * time.Second)
	if old.Record.Token <= at.UnixMicro() {
		t.Fatalf("the old token %d is not above the new claim's Now.UnixMicro() %d: the store's tokens do not follow the clock (leased_store.go)", old.Record.Token, at.UnixMicro())
	}
	c := e.mustClaim(t, "k", "fp", at)
	if c.Record.Token <= old.Record.Token {
		t.Errorf("token %d of the new record, want greater than the old record's %d although Now is behind it", c.Record.Token, old.Record.Token)
	}
}

func deletedRecordStillGetsAGreaterToken(t testing.TB, h *Harness) {
	e := setup(t, h)
	d, ok := e.store.(idem.ExpiredDeleter)
	if !ok {
		t.Skipf("the store (%T) cannot delete records (not an idem.ExpiredDeleter)", e.store)
	}
	now := e.clock.Now()
	old := e.mustClaim(t, "k", "fp", now)
	e.complete(t, old.Lease, testResult(), now, now.Add(time.Second))
	at := now.Add(2 * time.Second)
	n, err := d.DeleteExpired(context.Background(), &idem.DeleteExpiredParams{Now: at, Limit: 10})
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpired at %v = %d, %v; want the expired record deleted", at, n, err)
	}
	c := e.mustClaim(t, "k", "fp", at)
	if c.Record.Token <= old.Record.Token || c.Record.Token < at.UnixMicro() {
		t.Errorf("token %d of a record whose predecessor was deleted, want above the old %d and at least Now.UnixMicro() %d",
			c.Record.Token, old.Record.Token, at.UnixMicro())
	}
	if c.Record.Attempts != 1 || len(c.Steps) != 0 {
		t.Errorf("the new record: attempts %d, steps %s; want a fresh record", c.Record.Attempts, stepList(c.Steps))
	}
}

// raceClaims makes Claimers goroutines claim (s, key) at now at once, and
// returns their answers.
func (e *env) raceClaims(t testing.TB, key string, now time.Time) []*idem.Claim {
	t.Helper()
	answers := make([]*idem.Claim, Claimers)
	errs := make([]error, Claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range Claimers {
		wg.Go(func() {
			<-start
			answers[i], errs[i] = e.store.Claim(context.Background(), claimParams(key, "fp", now))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claimer %d: %v", i, err)
		}
	}
	return answers
}

// oneClaimed checks that exactly one of answers claimed, and that every
// other answer holds the winner's record.
func oneClaimed(t testing.TB, answers []*idem.Claim) {
	t.Helper()
	var winners []*idem.Claim
	for _, c := range answers {
		if c.Claimed {
			winners = append(winners, c)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d of %d concurrent claims succeeded, want exactly 1", len(winners), len(answers))
	}
	w := winners[0].Record
	for _, c := range answers {
		if !c.Claimed && (c.Record == nil || c.Record.Token != w.Token || c.Record.State != idem.StatePending) {
			t.Errorf("an unclaimed answer holds %s, want the winner's pending record (token %d)", describe(c.Record), w.Token)
		}
	}
}

func concurrentClaimsOfANewKeyClaimOnce(t testing.TB, h *Harness) {
	e := setup(t, h)
	oneClaimed(t, e.raceClaims(t, "k", e.clock.Now()))
}

func concurrentTakeoversClaimOnce(t testing.TB, h *Harness) {
	e := setup(t, h)
	first := e.mustClaim(t, "k", "fp", e.clock.Now())
	answers := e.raceClaims(t, "k", first.Record.LeaseUntil)
	oneClaimed(t, answers)
	for _, c := range answers {
		if c.Claimed && (c.Record.Attempts != 2 || c.Record.Token <= first.Record.Token) {
			t.Errorf("the takeover: attempts %d, token %d; want 2 and above %d", c.Record.Attempts, c.Record.Token, first.Record.Token)
		}
	}
}

func claimKeepsTheCallsTTL(t testing.TB, h *Harness) {
	e := setup(t, h)
	now := e.clock.Now()
	first := e.mustClaim(t, "k", "fp", now)
	if first.Record.TTL != callTTL {
		t.Errorf("a new claim's record: TTL %s, want the claim's %s", first.Record.TTL, callTTL)
	}
	if got := e.peek(t, "k", now).TTL; got != callTTL {
		t.Errorf("the stored pending record: TTL %s, want %s", got, callTTL)
	}
	abandonedAt := first.Record.LeaseUntil
	got, err := e.store.Abandoned(context.Background(), &idem.AbandonedParams{Now: abandonedAt, Limit: 10})
	if err != nil || len(got) != 1 || got[0].TTL != callTTL {
		t.Errorf("Abandoned at the end of the lease = %d records (%v), want the record with TTL %s", len(got), err, callTTL)
	}
	// A takeover with another TTL keeps the record's, and so does one
	// after a release.
	p := claimParams("k", "fp", abandonedAt)
	p.TTL = time.Hour
	second := e.claim(t, p)
	if !second.Claimed || second.Record.TTL != callTTL {
		t.Fatalf("takeover with TTL %s: claimed %v, record %s; want claimed, keeping TTL %s", p.TTL, second.Claimed, describe(second.Record), callTTL)
	}
	if err := e.store.Release(context.Background(), &idem.ReleaseParams{Lease: second.Lease, Now: abandonedAt, RetryAt: abandonedAt, Error: "down"}); err != nil {
		t.Fatalf("Release of the current holder: %v", err)
	}
	third := e.claim(t, p)
	if !third.Claimed || third.Record.TTL != callTTL {
		t.Fatalf("takeover after a release: claimed %v, record %s; want claimed, keeping TTL %s", third.Claimed, describe(third.Record), callTTL)
	}
	// A completed record that expired is replaced with the new claim's.
	e.complete(t, third.Lease, testResult(), abandonedAt, abandonedAt.Add(time.Minute))
	if got := e.peek(t, "k", abandonedAt).TTL; got != callTTL {
		t.Errorf("the completed record: TTL %s, want %s", got, callTTL)
	}
	p = claimParams("k", "fp", abandonedAt.Add(time.Minute))
	p.TTL = 2 * time.Hour
	if c := e.claim(t, p); !c.Claimed || c.Record.TTL != p.TTL {
		t.Errorf("claim replacing the expired record: claimed %v, record %s; want claimed with the new claim's TTL %s", c.Claimed, describe(c.Record), p.TTL)
	}
}

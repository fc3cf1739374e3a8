// Package admintest is the conformance suite of idem.Admin: every store
// that implements it runs Run in its tests. The cases make their records
// through the store's leased mode (idem.LeasedStore), and pass every time
// in the params, so nothing sleeps.
package admintest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// Store is what the suite tests: a leased store that is an idem.Admin.
type Store interface {
	idem.LeasedStore
	idem.Admin
}

// Harness opens the store under test.
type Harness struct {
	// Open returns an empty store; the test closes it (t.Cleanup).
	Open func(t testing.TB) Store
}

// Run runs every case on stores h opens, each case on a new one.
func Run(t *testing.T, h Harness) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, &env{t: t, s: h.Open(t), now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)})
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, e *env)
}{
	{"ListPagesCoverEveryRecordOnce", listPagesCoverEveryRecordOnce},
	{"ListFilters", listFilters},
	{"ListRefusesABadLimit", listRefusesABadLimit},
	{"StepsInTheOrderSaved", stepsInTheOrderSaved},
	{"ForgetDeletesCompletedAndExpired", forgetDeletesCompletedAndExpired},
	{"ForgetRefusesPendingWithoutForce", forgetRefusesPendingWithoutForce},
	{"ForgetNeverDeletesALiveLease", forgetNeverDeletesALiveLease},
	{"ForgetIsFencedByToken", forgetIsFencedByToken},
	{"ResolveRecordsTheAnswerRetriesGet", resolveRecordsTheAnswerRetriesGet},
	{"ResolveNeverOverwritesALiveHolder", resolveNeverOverwritesALiveHolder},
	{"ResolveRefusesARecordThatIsNotPending", resolveRefusesARecordThatIsNotPending},
	{"MissingRecordIsNotFound", missingRecordIsNotFound},
	{"AuditPagesNewestFirst", auditPagesNewestFirst},
}

type env struct {
	t   *testing.T
	s   Store
	now time.Time
}

const (
	lease = time.Minute
	fp    = "admintest-fp"
)

var ctx = context.Background()

// pending claims (scope, key) at e.now, with created = e.now.
func (e *env) pending(scope, key string) *idem.Claim {
	e.t.Helper()
	c, err := e.s.Claim(ctx, &idem.ClaimParams{Scope: scope, Key: key, Fingerprint: fp, Kind: "k", Input: []byte("in"),
		TTL: time.Hour, Now: e.now, Lease: lease})
	if err != nil || !c.Claimed {
		e.t.Fatalf("claim %s/%s: claimed %v, %v", scope, key, c != nil && c.Claimed, err)
	}
	return c
}

// completed writes a completed record of (scope, key) that expires at exp.
func (e *env) completed(scope, key string, exp time.Time) {
	e.t.Helper()
	c := e.pending(scope, key)
	if err := e.s.Complete(ctx, &idem.CompleteParams{Lease: c.Lease, Now: e.now,
		Result: idem.Result{Status: 201, Body: []byte("done " + key)}, ExpiresAt: exp}); err != nil {
		e.t.Fatal(err)
	}
}

// stale makes a pending record of (scope, key) whose lease has ended at
// e.now (claimed two leases ago), with a step and a last error.
func (e *env) stale(scope, key string) *idem.Claim {
	e.t.Helper()
	then := e.now.Add(-2 * lease)
	c, err := e.s.Claim(ctx, &idem.ClaimParams{Scope: scope, Key: key, Fingerprint: fp, Kind: "k", Input: []byte("in"),
		TTL: time.Hour, Now: then, Lease: lease})
	if err != nil || !c.Claimed {
		e.t.Fatalf("claim %s/%s: %v", scope, key, err)
	}
	if err := e.s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: "charge", Output: []byte("ch_1"), Now: then}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.s.Release(ctx, &idem.ReleaseParams{Lease: c.Lease, Now: then, RetryAt: then.Add(lease), Error: "provider timeout"}); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) all(p idem.ListParams) []*idem.Record {
	e.t.Helper()
	p.Now = e.now
	if p.Limit == 0 {
		p.Limit = 1000
	}
	var out []*idem.Record
	for range 1000 {
		page, err := e.s.List(ctx, &p)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, page.Records...)
		if page.Next == "" {
			return out
		}
		p.Cursor = page.Next
	}
	e.t.Fatal("List never ended")
	return nil
}

func names(recs []*idem.Record) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		m[r.Scope+"|"+r.Key]++
	}
	return m
}

func (e *env) audit() []*idem.AuditEntry {
	e.t.Helper()
	page, err := e.s.Audit(ctx, &idem.AuditParams{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return page.Entries
}

// claimAgain claims (scope, key) at when and returns the claim.
func (e *env) claimAgain(scope, key string, when time.Time) *idem.Claim {
	e.t.Helper()
	c, err := e.s.Claim(ctx, &idem.ClaimParams{Scope: scope, Key: key, Fingerprint: fp, Kind: "k", TTL: time.Hour, Now: when, Lease: lease})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func listPagesCoverEveryRecordOnce(t *testing.T, e *env) {
	want := map[string]int{}
	for i := range 23 {
		scope := fmt.Sprintf("scope%d", i%3)
		key := fmt.Sprintf("k%02d", i)
		if i%2 == 0 {
			e.completed(scope, key, e.now.Add(time.Hour))
		} else {
			e.pending(scope, key)
		}
		want[scope+"|"+key] = 1
	}
	for _, limit := range []int{1, 4, 23, 50} {
		got := names(e.all(idem.ListParams{Limit: limit}))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("limit %d: pages hold %v, want every record once: %v", limit, got, want)
		}
	}
}

func listFilters(t *testing.T, e *env) {
	old := e.now
	e.completed("a", "inv-1", e.now.Add(time.Hour))
	e.completed("a", "inv-2", e.now.Add(-time.Second)) // expired at now
	e.pending("a", "pay-1")
	e.now = e.now.Add(time.Hour)
	e.completed("b", "inv-3", e.now.Add(time.Hour))
	e.stale("b", "pay-2")
	// Everything above as of e.now; the expired one was written with an
	// expiry before old, so it is expired now too.
	every := e.all(idem.ListParams{})
	if len(every) != 5 {
		t.Fatalf("List with no filter: %d records, want 5", len(every))
	}
	for _, p := range []idem.ListParams{
		{Scope: "a"}, {Scope: "b"}, {Scope: "c"}, {Prefix: "inv-"}, {Prefix: "pay"}, {Scope: "a", Prefix: "inv"},
		{State: idem.ListCompleted}, {State: idem.ListPending}, {State: idem.ListExpired},
		{CreatedBefore: old.Add(time.Minute)}, {Scope: "b", State: idem.ListPending, Limit: 1},
	} {
		p.Now = e.now
		want := map[string]int{}
		for _, r := range every {
			if p.Matches(r) {
				want[r.Scope+"|"+r.Key]++
			}
		}
		if got := names(e.all(p)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("List %+v: %v, want %v", p, got, want)
		}
	}
	for _, r := range every {
		if r.Key == "pay-2" && (r.Attempts != 1 || r.LastError != "provider timeout" || r.Kind != "k" || r.State != idem.StatePending) {
			t.Errorf("listed pending record %+v: want its attempts, kind and last error", r)
		}
		if r.Key == "inv-3" && (r.Result.Status != 201 || r.State != idem.StateCompleted) {
			t.Errorf("listed completed record %+v: want its status", r)
		}
	}
}

func listRefusesABadLimit(t *testing.T, e *env) {
	if _, err := e.s.List(ctx, &idem.ListParams{Now: e.now}); err == nil {
		t.Error("List with Limit 0: no error")
	}
	if _, err := e.s.Audit(ctx, &idem.AuditParams{}); err == nil {
		t.Error("Audit with Limit 0: no error")
	}
}

func stepsInTheOrderSaved(t *testing.T, e *env) {
	c := e.pending("s", "k")
	for _, n := range []string{"b", "a", "c", "a"} {
		if err := e.s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: n, Output: []byte("out-" + n), Now: e.now}); err != nil {
			t.Fatal(err)
		}
	}
	steps, err := e.s.Steps(ctx, &idem.LookupParams{Scope: "s", Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s", steps); got != "[{b out-b} {a out-a} {c out-c}]" {
		t.Errorf("Steps = %s, want b, a, c in the order first saved", got)
	}
	if steps, err := e.s.Steps(ctx, &idem.LookupParams{Scope: "s", Key: "none"}); err != nil || len(steps) != 0 {
		t.Errorf("Steps of a missing record = %v, %v; want none", steps, err)
	}
}

func forgetDeletesCompletedAndExpired(t *testing.T, e *env) {
	e.completed("s", "live", e.now.Add(time.Hour))
	e.completed("s", "gone", e.now.Add(-time.Minute))
	for i, key := range []string{"live", "gone"} {
		before, err := e.s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: key, Now: e.now,
			Audit: idem.AuditEntry{At: e.now, Actor: "ops", Action: idem.AuditForget, Reason: "why " + key}})
		if err != nil {
			t.Fatalf("Forget %s: %v", key, err)
		}
		if before.State != idem.StateCompleted || string(before.Result.Body) != "done "+key {
			t.Errorf("Forget %s returned %+v, want the completed record", key, before)
		}
		if c := e.claimAgain("s", key, e.now); !c.Claimed || c.Record.Attempts != 1 {
			t.Errorf("after Forget %s, a claim did not run anew: %+v", key, c)
		}
		a := e.audit()
		if len(a) != i+1 {
			t.Fatalf("after %d forgets, %d audit entries", i+1, len(a))
		}
		got := a[0]
		if got.Action != idem.AuditForget || got.Actor != "ops" || got.Reason != "why "+key || got.Scope != "s" || got.Key != key ||
			!got.At.Equal(e.now) || got.ID == 0 || got.Before == nil || got.Before.State != idem.StateCompleted ||
			!bytes.Equal(got.Before.Result.Body, []byte("done "+key)) || got.Before.Result.Status != 201 {
			t.Errorf("audit entry %+v (before %+v): want who, when, why and the record before", got, got.Before)
		}
	}
}

func forgetRefusesPendingWithoutForce(t *testing.T, e *env) {
	e.stale("s", "k")
	_, err := e.s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Now: e.now, Audit: idem.AuditEntry{At: e.now, Action: idem.AuditForget}})
	if !errors.Is(err, idem.ErrPending) {
		t.Fatalf("Forget of a pending record without Force: %v, want ErrPending", err)
	}
	if n := len(e.audit()); n != 0 {
		t.Errorf("a refused Forget wrote %d audit entries", n)
	}
	before, err := e.s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Force: true, Now: e.now,
		Audit: idem.AuditEntry{At: e.now, Actor: "ops", Action: idem.AuditForget, Reason: "r"}})
	if err != nil {
		t.Fatalf("Forget with Force of a record whose lease ended: %v", err)
	}
	if before.State != idem.StatePending || before.LastError != "provider timeout" {
		t.Errorf("Forget returned %+v, want the pending record", before)
	}
	c := e.claimAgain("s", "k", e.now)
	if !c.Claimed || c.Record.Attempts != 1 || len(c.Steps) != 0 {
		t.Errorf("after Forget --force, claim %+v with steps %v; want a new record without steps", c.Record, c.Steps)
	}
	if a := e.audit(); len(a) != 1 || a[0].Before.State != idem.StatePending {
		t.Errorf("audit = %+v, want one entry with the pending record", a)
	}
}

func forgetNeverDeletesALiveLease(t *testing.T, e *env) {
	c := e.pending("s", "k")
	for _, at := range []time.Time{e.now, e.now.Add(lease - time.Microsecond)} {
		_, err := e.s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Force: true, Now: at, Audit: idem.AuditEntry{At: at, Action: idem.AuditForget}})
		if !errors.Is(err, idem.ErrLeaseLive) {
			t.Fatalf("Forget --force under a live lease at %s: %v, want ErrLeaseLive", at, err)
		}
	}
	if err := e.s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: c.Lease, Now: e.now, Duration: lease}); err != nil {
		t.Errorf("the holder lost its record to a refused Forget: %v", err)
	}
	if n := len(e.audit()); n != 0 {
		t.Errorf("a refused Forget wrote %d audit entries", n)
	}
}

func forgetIsFencedByToken(t *testing.T, e *env) {
	c := e.stale("s", "k")
	_, err := e.s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Force: true, Token: c.Lease.Token + 1, Now: e.now, Audit: idem.AuditEntry{At: e.now, Action: idem.AuditForget}})
	if !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Forget with a token not the record's: %v, want ErrFenced", err)
	}
	if _, err := e.s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Force: true, Token: c.Lease.Token, Now: e.now, Audit: idem.AuditEntry{At: e.now, Action: idem.AuditForget}}); err != nil {
		t.Fatalf("Forget with the record's token: %v", err)
	}
}

func resolveRecordsTheAnswerRetriesGet(t *testing.T, e *env) {
	c := e.stale("s", "pay")
	res := idem.Result{Status: 200, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"p1"}`)}
	before, err := e.s.Resolve(ctx, &idem.ResolveParams{Scope: "s", Key: "pay", Result: res, ExpiresAt: e.now.Add(time.Hour),
		Token: c.Lease.Token, Now: e.now, Audit: idem.AuditEntry{At: e.now, Actor: "ops", Action: idem.AuditResolve, Reason: "reconciled"}})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if before.State != idem.StatePending || before.Attempts != 1 {
		t.Errorf("Resolve returned %+v, want the pending record", before)
	}
	got := e.claimAgain("s", "pay", e.now.Add(time.Minute))
	r := got.Record
	if got.Claimed || r.State != idem.StateCompleted || r.Result.Status != 200 || string(r.Result.Body) != `{"id":"p1"}` ||
		fmt.Sprint(r.Result.Header) != fmt.Sprint(res.Header) || !r.ExpiresAt.Equal(e.now.Add(time.Hour)) {
		t.Errorf("a retry after Resolve got %+v (claimed %v), want the resolved answer", r, got.Claimed)
	}
	if err := e.s.Complete(ctx, &idem.CompleteParams{Lease: c.Lease, Now: e.now, ExpiresAt: e.now.Add(time.Hour)}); !errors.Is(err, idem.ErrFenced) {
		t.Errorf("the old holder's Complete after Resolve: %v, want ErrFenced", err)
	}
	if steps, _ := e.s.Steps(ctx, &idem.LookupParams{Scope: "s", Key: "pay"}); len(steps) != 0 {
		t.Errorf("a resolved record kept its steps %v", steps)
	}
	a := e.audit()
	if len(a) != 1 || a[0].Action != idem.AuditResolve || a[0].Status != 200 || a[0].Reason != "reconciled" ||
		a[0].Before.State != idem.StatePending || a[0].Before.LastError != "provider timeout" {
		t.Errorf("audit = %+v, want the resolve with its status and the pending record", a)
	}
}

func resolveNeverOverwritesALiveHolder(t *testing.T, e *env) {
	c := e.pending("s", "pay")
	_, err := e.s.Resolve(ctx, &idem.ResolveParams{Scope: "s", Key: "pay", Result: idem.Result{Status: 200}, ExpiresAt: e.now.Add(time.Hour),
		Now: e.now, Audit: idem.AuditEntry{At: e.now, Action: idem.AuditResolve}})
	if !errors.Is(err, idem.ErrLeaseLive) {
		t.Fatalf("Resolve under a live lease: %v, want ErrLeaseLive", err)
	}
	if err := e.s.Complete(ctx, &idem.CompleteParams{Lease: c.Lease, Now: e.now, Result: idem.Result{Status: 201}, ExpiresAt: e.now.Add(time.Hour)}); err != nil {
		t.Errorf("the live holder lost its record to a refused Resolve: %v", err)
	}
	// A takeover since the operator looked fences a Resolve with the old token.
	s := e.stale("s", "pay2")
	taken := e.claimAgain("s", "pay2", e.now)
	if !taken.Claimed {
		t.Fatal("takeover failed")
	}
	_, err = e.s.Resolve(ctx, &idem.ResolveParams{Scope: "s", Key: "pay2", Token: s.Lease.Token, Result: idem.Result{Status: 200},
		ExpiresAt: e.now.Add(time.Hour), Now: e.now.Add(2 * lease), Audit: idem.AuditEntry{At: e.now, Action: idem.AuditResolve}})
	if !errors.Is(err, idem.ErrFenced) {
		t.Errorf("Resolve with the token of before a takeover: %v, want ErrFenced", err)
	}
	if n := len(e.audit()); n != 0 {
		t.Errorf("refused Resolves wrote %d audit entries", n)
	}
}

func resolveRefusesARecordThatIsNotPending(t *testing.T, e *env) {
	e.completed("s", "k", e.now.Add(time.Hour))
	_, err := e.s.Resolve(ctx, &idem.ResolveParams{Scope: "s", Key: "k", Result: idem.Result{Status: 200}, ExpiresAt: e.now.Add(time.Hour),
		Now: e.now, Audit: idem.AuditEntry{At: e.now, Action: idem.AuditResolve}})
	if !errors.Is(err, idem.ErrNotPending) {
		t.Errorf("Resolve of a completed record: %v, want ErrNotPending", err)
	}
}

func missingRecordIsNotFound(t *testing.T, e *env) {
	if _, err := e.s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "none", Force: true, Now: e.now}); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Forget of a missing record: %v, want ErrNotFound", err)
	}
	if _, err := e.s.Resolve(ctx, &idem.ResolveParams{Scope: "s", Key: "none", Now: e.now, ExpiresAt: e.now}); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Resolve of a missing record: %v, want ErrNotFound", err)
	}
	if n := len(e.audit()); n != 0 {
		t.Errorf("changes of missing records wrote %d audit entries", n)
	}
}

func auditPagesNewestFirst(t *testing.T, e *env) {
	for i := range 7 {
		key := fmt.Sprintf("k%d", i)
		e.completed("s", key, e.now.Add(time.Hour))
		if _, err := e.s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: key, Now: e.now.Add(time.Duration(i) * time.Second),
			Audit: idem.AuditEntry{At: e.now.Add(time.Duration(i) * time.Second), Action: idem.AuditForget, Reason: key}}); err != nil {
			t.Fatal(err)
		}
	}
	var reasons []string
	p := idem.AuditParams{Limit: 3}
	for range 10 {
		page, err := e.s.Audit(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Entries {
			reasons = append(reasons, a.Reason)
		}
		if page.Next == 0 {
			break
		}
		p.Cursor = page.Next
	}
	if got := fmt.Sprint(reasons); got != "[k6 k5 k4 k3 k2 k1 k0]" {
		t.Errorf("audit pages = %s, want newest first, each entry once", got)
	}
}

package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/memstore"
)

// claimFailingStore is a memstore whose Claim fails, when told to, with an
// error that quotes the scope and key, as pgstore's errors do.
type claimFailingStore struct {
	*memstore.Store
	fail atomic.Bool
}

func (s *claimFailingStore) Claim(ctx context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	if s.fail.Load() {
		return nil, fmt.Errorf("the record of (%q, %q) was deleted under 3 claims in a row", p.Scope, p.Key)
	}
	return s.Store.Claim(ctx, p)
}

// The completer's log lines (finished, failed, stuck, claim failed) name a
// record by the digests of its scope and key, and never carry the scope or
// the key, not even inside the error they report: a scope may hold a
// principal derived from a credential.
func TestCompleterLogsNoScopeOrKey(t *testing.T) {
	t.Parallel()
	const (
		secretScope = "tenant:sk_live_SCOPESECRET"
		secretKey   = "key-sk_live_KEYSECRET-0001"
	)
	clock := testclock.New()
	s := &claimFailingStore{Store: memstore.New()}
	l, err := idem.NewLeased(s, &idem.LeasedConfig{Lease: 30 * time.Second, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	c, err := idem.NewCompleter(l, &idem.CompleterConfig{
		MinBackoff: time.Second, MaxBackoff: time.Minute, ReportAfter: 10 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var up atomic.Bool
	work := func(context.Context, *idem.Run) (idem.Result, error) {
		if !up.Load() {
			return idem.Result{}, fmt.Errorf("charge for tenant %s with key %q: provider down", secretScope, secretKey)
		}
		return idem.Result{Status: 201}, nil
	}
	if err := l.Register("payout", work); err != nil {
		t.Fatal(err)
	}
	req := idem.LeasedRequest{Scope: secretScope, Key: secretKey, Fingerprint: "fp", Kind: "payout"}
	if _, _, err := l.Do(context.Background(), req, work); err == nil {
		t.Fatal("first attempt did not fail")
	}
	pass := func(want func(idem.CompleterReport) bool) {
		t.Helper()
		rep, err := c.RunOnce(context.Background())
		if err != nil || !want(rep) {
			t.Fatalf("pass = %+v, %v", rep, err)
		}
	}
	pass(func(r idem.CompleterReport) bool { return r.Failed == 1 && r.Stuck == 0 }) // WARN: will retry
	clock.Advance(11 * time.Minute)
	pass(func(r idem.CompleterReport) bool { return r.Failed == 1 && r.Stuck == 1 }) // ERROR: needs a human
	clock.Advance(11 * time.Minute)
	s.fail.Store(true)
	pass(func(r idem.CompleterReport) bool { return r.Unavailable == 1 }) // WARN: could not claim
	s.fail.Store(false)
	up.Store(true)
	clock.Advance(11 * time.Minute)
	pass(func(r idem.CompleterReport) bool { return r.Completed == 1 }) // INFO: finished

	out := log.String()
	for _, msg := range []string{"will retry", "needs a human", "could not claim", "finished abandoned work"} {
		if !strings.Contains(out, msg) {
			t.Errorf("no %q line in the log:\n%s", msg, out)
		}
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("the log holds the scope or the key:\n%s", out)
	}
	scopeAttr := "scope_sha256=" + idem.KeyHash(idem.StoredScope(secretScope))
	keyAttr := "key_sha256=" + idem.KeyHash(secretKey)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, line := range lines {
		if !strings.Contains(line, scopeAttr) || !strings.Contains(line, keyAttr) {
			t.Errorf("a line without %s and %s:\n%s", scopeAttr, keyAttr, line)
		}
	}
	if len(lines) != 4 {
		t.Errorf("%d log lines, want 4:\n%s", len(lines), out)
	}
	// The error keeps its sense, with the digests in place of the values.
	if want := "key_sha256:" + idem.KeyHash(secretKey); !strings.Contains(out, want) {
		t.Errorf("the reported errors do not name the key by %s:\n%s", want, out)
	}
}

// An error that names a short scope or key where it does not quote it is
// logged as it is: a value that short would also match ordinary words.
func TestCompleterRedactsOnlyQuotedShortValues(t *testing.T) {
	t.Parallel()
	clock := testclock.New()
	s := memstore.New()
	l, err := idem.NewLeased(s, &idem.LeasedConfig{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	c, err := idem.NewCompleter(l, &idem.CompleterConfig{Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	work := func(context.Context, *idem.Run) (idem.Result, error) {
		return idem.Result{}, errors.New(`provider: "pay" refused, will pay later`)
	}
	if err := l.Register("payout", work); err != nil {
		t.Fatal(err)
	}
	req := idem.LeasedRequest{Scope: "s", Key: "pay", Fingerprint: "fp", Kind: "payout"}
	_, _, _ = l.Do(context.Background(), req, work)
	if _, err := c.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := `provider: key_sha256:` + idem.KeyHash("pay") + ` refused, will pay later`; !strings.Contains(log.String(), want) {
		t.Errorf("log = %s\nwant the error as %q", log, want)
	}
}

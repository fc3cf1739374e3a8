package transfers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/idemhttp"
)

// payoutEnv is a transfers service with payouts to a fake provider.
type payoutEnv struct {
	client
	prov   *fakeprovider.Provider
	leased *idem.Leased
	svc    *transfers.Service
}

const payer = "payer" // the bearer token, so the principal is transfers.BearerPrincipal(payer)

// setupPayouts starts the service on b's store with payouts to a fake
// provider (or to providerURL, when not empty), and accounts alice (1000)
// and decline-bob (1000).
func setupPayouts(t *testing.T, b backend, pcfg *fakeprovider.Config, providerURL string, mod func(*transfers.Config)) *payoutEnv {
	t.Helper()
	store, db := b.open(t)
	var ls idem.LeasedStore
	if b.leased != nil {
		ls = b.leased(t)
	} else if tx, ok := store.(idem.LeasedTxStore); ok {
		ls = tx
	} else {
		t.Fatalf("%T does not implement idem.LeasedTxStore", store)
	}
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := idem.NewLeased(ls, nil)
	if err != nil {
		t.Fatal(err)
	}
	prov, url := fakeprovider.Start(t, pcfg)
	if providerURL != "" {
		url = providerURL
	}
	cfg := &transfers.Config{
		Guard: g, Leased: l, Provider: url,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(cfg)
	}
	svc, err := transfers.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	e := &payoutEnv{client: client{t, srv.URL}, prov: prov, leased: l, svc: svc}
	for _, id := range []string{"alice", "decline-bob"} {
		if r := e.do("PUT", "/accounts/"+id, "", "", `{"balance":1000}`); r.status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, r.status, r.body)
		}
	}
	return e
}

func (e *payoutEnv) pay(key, account string, amount int64) response {
	e.t.Helper()
	return e.do("POST", "/payouts", key, payer, fmt.Sprintf(`{"account":%q,"amount":%d}`, account, amount))
}

func (e *payoutEnv) payouts() transfers.PayoutList {
	e.t.Helper()
	r := e.do("GET", "/payouts", "", "", "")
	var l transfers.PayoutList
	if r.status != 200 || json.Unmarshal([]byte(r.body), &l) != nil {
		e.t.Fatalf("GET /payouts: %d %s", r.status, r.body)
	}
	if l.Count != len(l.Payouts) {
		e.t.Fatalf("GET /payouts: count %d for %d payouts", l.Count, len(l.Payouts))
	}
	return l
}

// completePass runs one completer pass and returns its report.
func (e *payoutEnv) completePass() idem.CompleterReport {
	e.t.Helper()
	c, err := idem.NewCompleter(e.leased, &idem.CompleterConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		e.t.Fatal(err)
	}
	rep, err := c.RunOnce(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// chargeKey is the derived key a payout with the client key sends.
func chargeKey(key string) string {
	return idem.DerivedKey(idem.StoredScope(transfers.BearerPrincipal(payer)), key, "charge")
}

func decodePayout(t *testing.T, r response) transfers.Payout {
	t.Helper()
	var p transfers.Payout
	if r.status != http.StatusCreated || json.Unmarshal([]byte(r.body), &p) != nil {
		t.Fatalf("got %d %s, want 201 and a payout", r.status, r.body)
	}
	return p
}

func problemType(t *testing.T, r response) string {
	t.Helper()
	var p struct{ Type string }
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("%d %s: not a problem: %v", r.status, r.body, err)
	}
	return p.Type
}

func TestPayoutCreatedAndReplayed(t *testing.T) {
	t.Parallel()
	for _, b := range payoutBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setupPayouts(t, b, nil, "", nil)
			first := e.pay("k1", "alice", 300)
			p := decodePayout(t, first)
			if p.ID <= 0 || p.Account != "alice" || p.Amount != 300 || p.ProviderChargeID == "" || p.CreatedAt == "" || p.State != "" {
				t.Fatalf("payout %+v (%s): want id, account alice, amount 300, a charge id, created_at and no state", p, first.body)
			}
			replay := e.pay("k1", "alice", 300)
			if replay.status != http.StatusCreated || replay.body != first.body || replay.header.Get(idemhttp.ReplayedHeader) != "true" {
				t.Fatalf("replay %d %q (replayed %q), want the first answer %q replayed", replay.status, replay.body, replay.header.Get(idemhttp.ReplayedHeader), first.body)
			}
			if got := e.balance("alice"); got != 700 {
				t.Fatalf("balance %d, want 700 (one debit)", got)
			}
			charges := e.prov.Charges()
			if len(charges) != 1 {
				t.Fatalf("%d charges, want 1", len(charges))
			}
			c := charges[0]
			if c.ID != p.ProviderChargeID || c.Key != chargeKey("k1") || c.Reference != c.Key || c.Account != "alice" || c.Amount != 300 {
				t.Fatalf("charge %+v, want id %q under key and reference %q", c, p.ProviderChargeID, chargeKey("k1"))
			}
			l := e.payouts()
			want := transfers.Payout{ID: p.ID, Account: "alice", Amount: 300, State: "completed", ProviderChargeID: p.ProviderChargeID, CreatedAt: p.CreatedAt}
			if len(l.Payouts) != 1 || l.Payouts[0] != want {
				t.Fatalf("GET /payouts %+v, want [%+v]", l, want)
			}
		})
	}
}

func TestPayoutRefusedBeforeTheProvider(t *testing.T) {
	t.Parallel()
	for _, b := range payoutBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setupPayouts(t, b, nil, "", nil)
			for _, tc := range []struct {
				name, account string
				amount        int64
				kind          string
			}{
				{"UnknownAccount", "nobody", 10, "unknown-account"},
				{"ZeroAmount", "alice", 0, "invalid-amount"},
				{"NegativeAmount", "alice", -5, "invalid-amount"},
				{"InsufficientFunds", "alice", 1001, "insufficient-funds"},
			} {
				key := "refused-" + tc.name
				r := e.pay(key, tc.account, tc.amount)
				if r.status != http.StatusUnprocessableEntity || problemType(t, r) != transfers.ProblemBase+tc.kind {
					t.Fatalf("%s: %d %s, want 422 %s", tc.name, r.status, r.body, tc.kind)
				}
				again := e.pay(key, tc.account, tc.amount)
				if again.status != http.StatusUnprocessableEntity || again.body != r.body || again.header.Get(idemhttp.ReplayedHeader) != "true" {
					t.Fatalf("%s: retry %d %s (replayed %q), want the 422 replayed", tc.name, again.status, again.body, again.header.Get(idemhttp.ReplayedHeader))
				}
			}
			if n := e.prov.TotalRequests(); n != 0 {
				t.Fatalf("%d provider calls, want 0", n)
			}
			if l := e.payouts(); l.Count != 0 {
				t.Fatalf("payouts %+v, want none", l)
			}
			if got := e.balance("alice"); got != 1000 {
				t.Fatalf("balance %d, want 1000", got)
			}
		})
	}
}

func TestPayoutMalformedNotRecorded(t *testing.T) {
	t.Parallel()
	e := setupPayouts(t, backends(t)[0], nil, "", nil)
	if r := e.do("POST", "/payouts", "k1", payer, `{"account":"alice","amount":`); r.status != http.StatusBadRequest {
		t.Fatalf("malformed: %d %s, want 400", r.status, r.body)
	}
	if r := e.do("POST", "/payouts", "k1", payer, `{"account":"bad id","amount":5}`); r.status != http.StatusBadRequest {
		t.Fatalf("invalid account id: %d %s, want 400", r.status, r.body)
	}
	decodePayout(t, e.pay("k1", "alice", 5)) // the key was never recorded
}

func TestPayoutDeclinedIsCreditedBack(t *testing.T) {
	t.Parallel()
	for _, b := range payoutBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setupPayouts(t, b, nil, "", nil)
			r := e.pay("k1", "decline-bob", 400)
			if r.status != http.StatusUnprocessableEntity || !strings.HasSuffix(problemType(t, r), "payout-declined") {
				t.Fatalf("got %d %s, want 422 payout-declined", r.status, r.body)
			}
			if got := problemType(t, r); got != transfers.ProblemBase+"payout-declined" {
				t.Fatalf("type %q, want %q", got, transfers.ProblemBase+"payout-declined")
			}
			again := e.pay("k1", "decline-bob", 400)
			if again.status != r.status || again.body != r.body || again.header.Get(idemhttp.ReplayedHeader) != "true" {
				t.Fatalf("retry %d %s, want the 422 replayed", again.status, again.body)
			}
			if got := e.balance("decline-bob"); got != 1000 {
				t.Fatalf("balance %d, want 1000 (credited back)", got)
			}
			l := e.payouts()
			if l.Count != 1 || l.Payouts[0].State != "declined" || l.Payouts[0].ProviderChargeID != "" {
				t.Fatalf("payouts %+v, want one declined without a charge id", l)
			}
			if n, c := e.prov.Requests(chargeKey("k1")), len(e.prov.Charges()); n != 1 || c != 0 {
				t.Fatalf("%d provider calls, %d charges; want 1 call (the decline is definitive), 0 charges", n, c)
			}
		})
	}
}

func TestPayoutUnknownOutcomeResumesAtTheCharge(t *testing.T) {
	t.Parallel()
	for _, b := range payoutBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setupPayouts(t, b, nil, "", nil)
			e.prov.Inject(fakeprovider.ServerError, fakeprovider.ServerError, fakeprovider.ServerError)
			r := e.pay("k1", "alice", 250)
			if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
				t.Fatalf("got %d %s (Retry-After %q), want 503 with Retry-After", r.status, r.body, r.header.Get("Retry-After"))
			}
			if n := e.prov.Requests(chargeKey("k1")); n != transfers.DefaultProviderAttempts {
				t.Fatalf("%d provider calls, want %d (bounded retries in the request)", n, transfers.DefaultProviderAttempts)
			}
			if got := e.balance("alice"); got != 750 {
				t.Fatalf("balance after the 503: %d, want 750 (debited, never compensated)", got)
			}
			if l := e.payouts(); l.Count != 1 || l.Payouts[0].State != "pending" || l.Payouts[0].ProviderChargeID != "" {
				t.Fatalf("payouts %+v, want one pending", l)
			}
			p := decodePayout(t, e.pay("k1", "alice", 250))
			if got := e.balance("alice"); got != 750 {
				t.Fatalf("balance after the retry: %d, want 750 (no second debit)", got)
			}
			if n, fx := e.prov.Requests(chargeKey("k1")), e.prov.Effects(chargeKey("k1")); n != transfers.DefaultProviderAttempts+1 || fx != 1 {
				t.Fatalf("%d calls, %d charges under the derived key; want %d calls with the same key, 1 charge", n, fx, transfers.DefaultProviderAttempts+1)
			}
			if l := e.payouts(); l.Count != 1 || l.Payouts[0].State != "completed" || l.Payouts[0].ID != p.ID {
				t.Fatalf("payouts %+v, want the one payout %d completed", l, p.ID)
			}
		})
	}
}

func TestPayoutAppliedButUnanswered(t *testing.T) {
	t.Parallel()
	for _, b := range payoutBackends(t) {
		for _, fault := range []fakeprovider.Fault{fakeprovider.TimeoutAfterApply, fakeprovider.ResetAfterApply} {
			t.Run(b.name+"/"+fault.String(), func(t *testing.T) {
				t.Parallel()
				e := setupPayouts(t, b, &fakeprovider.Config{Delay: 20 * time.Second}, "", func(c *transfers.Config) {
					c.ProviderTimeout = 500 * time.Millisecond
				})
				// Within the request: the second call finds the charge.
				e.prov.Inject(fault)
				p := decodePayout(t, e.pay("k1", "alice", 100))
				if fx := e.prov.Effects(chargeKey("k1")); fx != 1 || p.ProviderChargeID != e.prov.Charges()[0].ID {
					t.Fatalf("%d charges, payout charge %q; want the 1 charge applied before the fault", fx, p.ProviderChargeID)
				}
				// Across executions: every call of the request fails
				// after the charge, the retry finds it. (net/http's
				// Transport itself retries a keyed POST once on a reset
				// reused connection: a third 5xx covers that call.)
				e.prov.Inject(fault, fakeprovider.ServerError, fakeprovider.ServerError, fakeprovider.ServerError)
				if r := e.pay("k2", "alice", 100); r.status != http.StatusServiceUnavailable {
					t.Fatalf("got %d %s, want 503", r.status, r.body)
				}
				p2 := decodePayout(t, e.pay("k2", "alice", 100))
				if fx := e.prov.Effects(chargeKey("k2")); fx != 1 {
					t.Fatalf("%d charges for k2, want 1", fx)
				}
				if len(e.prov.Charges()) != 2 || p2.ProviderChargeID != e.prov.Charges()[1].ID {
					t.Fatalf("charges %+v, payout %+v: want one charge per payout", e.prov.Charges(), p2)
				}
				if got := e.balance("alice"); got != 800 {
					t.Fatalf("balance %d, want 800", got)
				}
			})
		}
	}
}

func TestPayoutFinishedByTheCompleter(t *testing.T) {
	t.Parallel()
	for _, b := range payoutBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setupPayouts(t, b, nil, "", func(c *transfers.Config) { c.ProviderTimeout = 500 * time.Millisecond })
			e.prov.Inject(fakeprovider.TimeoutAfterApply, fakeprovider.ServerError, fakeprovider.ServerError,
				fakeprovider.ServerError, fakeprovider.ServerError, fakeprovider.ServerError)
			if r := e.pay("paid", "alice", 100); r.status != http.StatusServiceUnavailable {
				t.Fatalf("paid: got %d %s, want 503", r.status, r.body)
			}
			if r := e.pay("declined", "decline-bob", 100); r.status != http.StatusServiceUnavailable {
				t.Fatalf("declined: got %d %s, want 503", r.status, r.body)
			}
			rep := e.completePass()
			if rep.Completed != 2 {
				t.Fatalf("completer report %+v, want 2 completed", rep)
			}
			p := decodePayout(t, e.pay("paid", "alice", 100))
			if fx := e.prov.Effects(chargeKey("paid")); fx != 1 || len(e.prov.Charges()) != 1 || p.ProviderChargeID != e.prov.Charges()[0].ID {
				t.Fatalf("%d charges under the key, %d in all, payout %+v: want the one charge", fx, len(e.prov.Charges()), p)
			}
			if r := e.pay("declined", "decline-bob", 100); r.status != http.StatusUnprocessableEntity || r.header.Get(idemhttp.ReplayedHeader) != "true" {
				t.Fatalf("declined retry: %d %s, want the completer's 422 replayed", r.status, r.body)
			}
			if a, d := e.balance("alice"), e.balance("decline-bob"); a != 900 || d != 1000 {
				t.Fatalf("balances %d, %d; want 900 and 1000", a, d)
			}
			if rep := e.completePass(); rep.Found != 0 {
				t.Fatalf("second pass %+v, want nothing left", rep)
			}
		})
	}
}

// A 409 from the provider (another request with the key in progress
// there) is not a decline: the payout stays debited and pending.
func TestPayoutConflictIsNotADecline(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	conflict := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusConflict)
	}))
	t.Cleanup(conflict.Close)
	e := setupPayouts(t, backends(t)[0], nil, conflict.URL, nil)
	r := e.pay("k1", "alice", 100)
	if r.status != http.StatusServiceUnavailable || !strings.HasSuffix(problemType(t, r), "payout-pending") {
		t.Fatalf("got %d %s, want 503 payout-pending", r.status, r.body)
	}
	if got := e.balance("alice"); got != 900 {
		t.Fatalf("balance %d, want 900 (not credited back)", got)
	}
	if l := e.payouts(); l.Count != 1 || l.Payouts[0].State != "pending" {
		t.Fatalf("payouts %+v, want one pending", l)
	}
	if n := calls.Load(); n != transfers.DefaultProviderAttempts {
		t.Fatalf("%d calls, want %d", n, transfers.DefaultProviderAttempts)
	}
}

func TestPayoutConcurrentOneKey(t *testing.T) {
	t.Parallel()
	for _, b := range payoutBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setupPayouts(t, b, nil, "", nil)
			const n = 50
			res := make([]response, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					res[i] = e.pay("k1", "alice", 10)
				})
			}
			close(start)
			wg.Wait()
			var created []string
			for _, r := range res {
				switch r.status {
				case http.StatusCreated:
					created = append(created, r.body)
				case http.StatusConflict:
				default:
					t.Fatalf("got %d %s, want 201 or 409 in-flight", r.status, r.body)
				}
			}
			if len(created) == 0 {
				t.Fatal("no request got 201")
			}
			for _, body := range created {
				if body != created[0] {
					t.Fatalf("two answers %s and %s, want one payout", created[0], body)
				}
			}
			if got := e.balance("alice"); got != 990 {
				t.Fatalf("balance %d, want 990 (one debit)", got)
			}
			if c := len(e.prov.Charges()); c != 1 {
				t.Fatalf("%d charges, want 1", c)
			}
			if l := e.payouts(); l.Count != 1 {
				t.Fatalf("%d payouts, want 1", l.Count)
			}
		})
	}
}

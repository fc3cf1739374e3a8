package transfers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

// A provider that applies the charge and answers with a redirect gives no
// definitive answer: the redirect is never followed (no GET reaches the
// provider), the payout is neither credited back (a 303 to a page whose
// GET is a 404) nor completed with an id that names no charge (a 302 to a
// status page whose GET is a 200 with an id), it answers 503
// payout-pending, and the retry finds the one charge under the same key.
func TestPayoutRedirectIsUnknown(t *testing.T) {
	t.Parallel()
	for _, b := range payoutBackends(t) {
		for _, fault := range []fakeprovider.Fault{fakeprovider.SeeOtherAfterApply, fakeprovider.FoundAfterApply} {
			t.Run(b.name+"/"+fault.String(), func(t *testing.T) {
				t.Parallel()
				e := setupPayouts(t, b, nil, "", nil)
				faults := make([]fakeprovider.Fault, transfers.DefaultProviderAttempts)
				for i := range faults {
					faults[i] = fault
				}
				e.prov.Inject(faults...)
				r := e.pay("k1", "alice", 100)
				if r.status != http.StatusServiceUnavailable || !strings.HasSuffix(problemType(t, r), "/payout-pending") || r.header.Get("Retry-After") == "" {
					t.Fatalf("got %d %s, want 503 payout-pending with Retry-After", r.status, r.body)
				}
				if n := e.prov.Gets(); n != 0 {
					t.Fatalf("the provider got %d GETs, want none (a redirect is never followed)", n)
				}
				if got := e.balance("alice"); got != 900 {
					t.Fatalf("balance %d, want 900 (debited, never credited back)", got)
				}
				if l := e.payouts(); l.Count != 1 || l.Payouts[0].State != "pending" || l.Payouts[0].ProviderChargeID != "" {
					t.Fatalf("payouts %+v, want one pending without a charge id", l)
				}
				if n, fx := e.prov.Requests(chargeKey("k1")), e.prov.Effects(chargeKey("k1")); n != transfers.DefaultProviderAttempts || fx != 1 {
					t.Fatalf("%d calls, %d charges; want %d calls with the key, 1 charge", n, fx, transfers.DefaultProviderAttempts)
				}
				p := decodePayout(t, e.pay("k1", "alice", 100))
				charges := e.prov.Charges()
				if len(charges) != 1 || p.ProviderChargeID != charges[0].ID || e.balance("alice") != 900 || e.prov.Gets() != 0 {
					t.Fatalf("payout %+v, charges %+v, balance %d, %d GETs: want the one charge, 900, no GET", p, charges, e.balance("alice"), e.prov.Gets())
				}
			})
		}
	}
}

package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/internal/redistest"
)

// What a Redis loss costs idem serve -db redis://… -ledger …, measured on
// a Redis server of the test's own, flushed (FLUSHALL) twice:
//
//   - mid-payout (the provider failing, the payout pending and debited):
//     no retry comes, and the orphan scan that serve runs beside its
//     completer finishes the payout (one charge, under the same derived
//     key) and counts it in idem_payout_orphans_total{outcome="completed"};
//     the client's retry then gets the payout from the ledger;
//   - after completion: the retry gets the same payout from the ledger,
//     with no second debit and no call to the provider.
func TestPayoutE2ERedisLoss(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t, redistest.ServerOptions{})
	rc := rs.Client()
	t.Cleanup(func() { rc.Close() })
	flush := func() {
		t.Helper()
		if err := rc.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	prov, purl := fakeprovider.Start(t, nil)
	s := startServe(t, "-db", "redis://"+rs.Addr()+"/0", "-ledger", filepath.Join(t.TempDir(), "ledger.db"),
		"-provider", purl, "-complete-interval", "200ms", "-orphan-after", "1s")
	if status, body := s.do(t, "PUT", "/accounts/alice", "", `{"balance":1000}`); status != 200 {
		t.Fatalf("PUT /accounts/alice: %d %s", status, body)
	}

	const key = "redis-loss"
	// Three errors for the request's own attempt, and nine more so that
	// a completer pass that takes the released record before the flush
	// below (on a loaded machine the test may not get there first) fails
	// too: the payout must be left for the orphan scan to finish.
	errs := make([]fakeprovider.Fault, 12)
	for i := range errs {
		errs[i] = fakeprovider.ServerError
	}
	prov.Inject(errs...)
	if status, body := s.do(t, "POST", "/payouts", key, payoutBody()); status != 503 || !strings.Contains(body, "payout-pending") {
		t.Fatalf("POST /payouts: %d %s, want 503 payout-pending", status, body)
	}
	flush()
	waitFor(t, "the orphaned payout completed by the scan", func() bool {
		l := s.payoutList(t)
		return len(l) == 1 && l[0].State == "completed"
	})
	first := checkReconciled(t, s, prov, key)
	if m := metrics(t, s); !strings.Contains(m, `idem_payout_orphans_total{outcome="completed"} 1`) {
		t.Fatalf("metrics without the completed orphan:\n%s", grepLines(m, "idem_payout_orphan"))
	}
	if !strings.Contains(s.stderr.String(), "completed an orphaned payout") {
		t.Fatalf("no log line of the orphan:\n%s", s.stderr)
	}
	calls := prov.TotalRequests()
	// A completer pass that took the key before the flush may still be
	// running it in this process (its provider calls fail): a retry
	// meanwhile is refused in flight (409, Retry-After), and retries as a
	// client would.
	retry := func() (int, string) {
		t.Helper()
		for range 150 {
			status, body := s.do(t, "POST", "/payouts", key, payoutBody())
			if status != 409 {
				return status, body
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatal("the retry was refused in flight for 30s")
		return 0, ""
	}
	if status, body := retry(); status != 201 || !strings.Contains(body, first.ProviderChargeID) {
		t.Fatalf("retry after the scan: %d %s, want 201 with charge %s", status, body, first.ProviderChargeID)
	}

	flush()
	if status, body := retry(); status != 201 || !strings.Contains(body, first.ProviderChargeID) {
		t.Fatalf("retry after the completed payout's record was lost: %d %s, want 201 with charge %s", status, body, first.ProviderChargeID)
	}
	if n := prov.TotalRequests(); n != calls {
		t.Fatalf("the retries called the provider %d times, want 0 (answered from the ledger)", n-calls)
	}
	checkReconciled(t, s, prov, key)
}

// metrics returns the server's GET /metrics.
func metrics(t *testing.T, s *server) string {
	t.Helper()
	res, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", res.StatusCode, err)
	}
	return string(b)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

package transfers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/redisstore"
)

// payoutBackends are the backends of the payout tests: the ledger and
// every record on SQLite or PostgreSQL (local steps), and the ledger there
// with the payouts' leased records on Redis (steps recorded after the
// ledger's commit).
func payoutBackends(t *testing.T) []backend {
	var out []backend
	for _, b := range backends(t) {
		out = append(out, b)
		out = append(out, backend{name: b.name + "+Redis", open: b.open, leased: openRedis})
	}
	return out
}

// openRedis returns a Redis store of the test's own keys, deleted when
// the test ends.
func openRedis(t *testing.T) idem.LeasedStore {
	t.Helper()
	c := redistest.Client(t)
	s, err := redisstore.New(c, &redisstore.Config{Prefix: redistest.Name(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loseStepOnce is a leased store whose SaveStep of one step name fails
// once, having written nothing: as if the process had died after the
// step's ledger transaction committed and before its recovery point was
// recorded.
type loseStepOnce struct {
	idem.LeasedStore
	name string
	lost atomic.Int64
}

func (s *loseStepOnce) SaveStep(ctx context.Context, p *idem.SaveStepParams) error {
	if p.Name == s.name && s.lost.CompareAndSwap(0, 1) {
		return fmt.Errorf("%w: the step %q was not recorded (test)", idem.ErrUnavailable, p.Name)
	}
	return s.LeasedStore.SaveStep(ctx, p)
}

// On a store without local steps, a step that writes the ledger commits
// before its recovery point is recorded. When the record is lost (a crash
// between the two), the next execution runs the step again, and it finds
// its own commit: one debit, one refund, one completion, whether the
// client's retry or the completer runs it.
func TestPayoutLedgerStepRecordLost(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		for _, step := range []string{"debit", "complete", "refund"} {
			for _, by := range []string{"Retry", "Completer"} {
				t.Run(b.name+"+Redis/"+step+"/"+by, func(t *testing.T) {
					t.Parallel()
					lose := &loseStepOnce{name: step}
					b := backend{name: b.name, open: b.open, leased: func(t *testing.T) idem.LeasedStore {
						lose.LeasedStore = openRedis(t)
						return lose
					}}
					e := setupPayouts(t, b, nil, "", nil)
					account, want := "alice", int64(700)
					if step == "refund" {
						account, want = "decline-bob", 1000
					}
					r := e.pay("k1", account, 300)
					if r.status != http.StatusServiceUnavailable || lose.lost.Load() != 1 {
						t.Fatalf("got %d %s (lost %d records), want 503 after the lost record", r.status, r.body, lose.lost.Load())
					}
					if by == "Completer" {
						checkAbandoned(t, e)
						if rep := e.completePass(); rep.Completed != 1 {
							t.Fatalf("completer %+v, want 1 completed", rep)
						}
					}
					again := e.pay("k1", account, 300)
					l := e.payouts()
					if got := e.balance(account); got != want {
						t.Fatalf("balance %d, want %d", got, want)
					}
					if len(l.Payouts) != 1 {
						t.Fatalf("payouts %+v, want one", l)
					}
					if step == "refund" {
						if again.status != http.StatusUnprocessableEntity || !strings.HasSuffix(problemType(t, again), "payout-declined") || l.Payouts[0].State != "declined" {
							t.Fatalf("retry %d %s, payouts %+v: want 422 payout-declined and one declined payout", again.status, again.body, l)
						}
						return
					}
					p := decodePayout(t, again)
					charges := e.prov.Charges()
					if len(charges) != 1 || p.ID != l.Payouts[0].ID || l.Payouts[0].State != "completed" || p.ProviderChargeID != charges[0].ID {
						t.Fatalf("payout %+v, payouts %+v, charges %+v: want one completed payout with the one charge", p, l, charges)
					}
					if by == "Completer" && again.header.Get(idemhttp.ReplayedHeader) != "true" {
						t.Fatalf("retry after the completer not replayed: %d %s", again.status, again.body)
					}
				})
			}
		}
	}
}

// checkAbandoned checks that the payout answered 503 is abandoned: its
// record was released with RetryAt = now, for the completer to take.
func checkAbandoned(t *testing.T, e *payoutEnv) {
	t.Helper()
	recs, err := e.leased.Store().Abandoned(context.Background(), &idem.AbandonedParams{Now: time.Now(), Limit: 10})
	if err != nil || len(recs) != 1 {
		t.Fatalf("abandoned %d records (%v), want the released one", len(recs), err)
	}
}

package transfers_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/redisstore"
)

// lossEnv is a payout service whose leased records live on a Redis server
// of the test's own, which the test flushes to lose them, as a restart
// without persistence, a failover or an eviction loses them.
type lossEnv struct {
	*payoutEnv
	redis *redis.Client
	log   *syncBuffer
}

// setupLoss starts the service on b's ledger with its leased records on a
// private Redis and its log in a buffer.
func setupLoss(t *testing.T, b backend, mod func(*transfers.Config)) *lossEnv {
	t.Helper()
	srv := redistest.StartServer(t, redistest.ServerOptions{})
	c := srv.Client()
	t.Cleanup(func() { c.Close() })
	log := new(syncBuffer)
	b.leased = func(t *testing.T) idem.LeasedStore {
		s, err := redisstore.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	e := setupPayouts(t, b, nil, "", func(cfg *transfers.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
		if mod != nil {
			mod(cfg)
		}
	})
	return &lossEnv{payoutEnv: e, redis: c, log: log}
}

// flush loses every leased record.
func (e *lossEnv) flush() {
	e.t.Helper()
	if err := e.redis.FlushAll(context.Background()).Err(); err != nil {
		e.t.Fatal(err)
	}
}

// scan runs one orphan scan an hour from now, past any payout's After.
func (e *lossEnv) scan() transfers.OrphanReport {
	e.t.Helper()
	rep, err := e.svc.FinishOrphans(context.Background(), &transfers.OrphanParams{Now: time.Now().Add(time.Hour)})
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// checkOnce checks the ledger and the provider after the payout of key:
// one payout in state, the balance of account, and at most one charge
// under the key, which a completed payout holds.
func (e *lossEnv) checkOnce(key, account, state string, balance int64) transfers.Payout {
	e.t.Helper()
	l := e.payouts()
	if len(l.Payouts) != 1 || l.Payouts[0].State != state {
		e.t.Fatalf("payouts %+v, want one %s", l, state)
	}
	if got := e.balance(account); got != balance {
		e.t.Fatalf("balance %d, want %d", got, balance)
	}
	p := l.Payouts[0]
	charges := e.prov.Charges()
	switch {
	case e.prov.Effects(chargeKey(key)) > 1 || len(charges) > 1:
		e.t.Fatalf("charges %+v, want at most one", charges)
	case state == transfers.PayoutCompleted && (len(charges) != 1 || p.ProviderChargeID != charges[0].ID):
		e.t.Fatalf("payout %+v, charges %+v: want the one charge on the payout", p, charges)
	}
	return p
}

// A payout left pending (the provider's answer unknown) whose leased
// record is lost is never debited twice: the client's retry resumes it
// from the ledger and charges with the same key, and, when no retry
// comes, the orphan scan finishes it (completed, or credited back only on
// a decline), or reports it as needing a human while the answer stays
// unknown. A retry after the scan is answered from the ledger, with no
// further call to the provider.
func TestPayoutRedisLostWhilePending(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		for _, tc := range []struct {
			name, account string
			finish        string // retry or scan
			unknown       bool   // the provider still fails at the scan
			state         string
			balance       int64
		}{
			{"Retry", "alice", "retry", false, transfers.PayoutCompleted, 900},
			{"Scan", "alice", "scan", false, transfers.PayoutCompleted, 900},
			{"ScanDeclined", "decline-bob", "scan", false, transfers.PayoutDeclined, 1000},
			{"ScanUnknown", "alice", "scan", true, transfers.PayoutPending, 900},
		} {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := setupLoss(t, b, nil)
				e.prov.Inject(fakeprovider.ServerError, fakeprovider.ServerError, fakeprovider.ServerError)
				if r := e.pay("k1", tc.account, 100); r.status != http.StatusServiceUnavailable {
					t.Fatalf("got %d %s, want 503 payout-pending", r.status, r.body)
				}
				if rep, err := e.svc.FinishOrphans(context.Background(), nil); err != nil || rep.Found != 0 {
					t.Fatalf("scan while the record lives: %+v, %v; want nothing taken up", rep, err)
				}
				e.flush()
				if tc.finish == "retry" {
					p := decodePayout(t, e.pay("k1", tc.account, 100))
					if got := e.checkOnce("k1", tc.account, tc.state, tc.balance); got.ID != p.ID {
						t.Fatalf("answered payout %d, the ledger's is %d", p.ID, got.ID)
					}
					if rep := e.scan(); rep.Found != 0 {
						t.Fatalf("scan after the retry %+v, want nothing left", rep)
					}
					return
				}
				if tc.unknown {
					e.prov.Inject(fakeprovider.ServerError, fakeprovider.ServerError, fakeprovider.ServerError)
				}
				rep := e.scan()
				want := transfers.OrphanReport{Found: 1}
				switch tc.state {
				case transfers.PayoutCompleted:
					want.Completed = 1
				case transfers.PayoutDeclined:
					want.Declined = 1
				default:
					want.Failed = 1
				}
				if rep != want {
					t.Fatalf("scan %+v, want %+v", rep, want)
				}
				e.checkOnce("k1", tc.account, tc.state, tc.balance)
				if tc.unknown {
					if log := e.log.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "needs a human") || !strings.Contains(log, chargeKey("k1")) {
						t.Fatalf("log %s\nwant an ERROR line saying the orphan needs a human, with its reference", log)
					}
					return
				}
				calls := e.prov.TotalRequests()
				r := e.pay("k1", tc.account, 100)
				if tc.state == transfers.PayoutDeclined {
					if r.status != http.StatusUnprocessableEntity || !strings.HasSuffix(problemType(t, r), "/payout-declined") {
						t.Fatalf("retry after the scan: %d %s, want 422 payout-declined", r.status, r.body)
					}
				} else {
					decodePayout(t, r)
				}
				if n := e.prov.TotalRequests(); n != calls {
					t.Fatalf("the retry after the scan called the provider %d times, want 0 (answered from the ledger)", n-calls)
				}
				e.checkOnce("k1", tc.account, tc.state, tc.balance)
			})
		}
	}
}

// A record lost during the provider call (held there while Redis is
// flushed): the execution cannot record the charge, and the retry finds
// the payout and the charge under the same key: one debit, one charge.
func TestPayoutRedisLostDuringCharge(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setupLoss(t, b, nil)
			e.prov.Inject(fakeprovider.Hold)
			first := make(chan int, 1)
			var wg sync.WaitGroup
			wg.Go(func() {
				req, _ := http.NewRequest("POST", e.url+"/payouts", strings.NewReader(`{"account":"alice","amount":100}`))
				req.Header.Set("Idempotency-Key", "k1")
				req.Header.Set("Authorization", "Bearer "+payer)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					first <- 0
					return
				}
				res.Body.Close()
				first <- res.StatusCode
			})
			select {
			case <-e.prov.Held():
			case <-time.After(30 * time.Second):
				t.Fatal("the charge never reached the provider")
			}
			e.flush()
			e.prov.Release()
			wg.Wait()
			t.Logf("the first execution, its record lost: %d", <-first)
			p := decodePayout(t, e.pay("k1", "alice", 100))
			if got := e.checkOnce("k1", "alice", transfers.PayoutCompleted, 900); got.ID != p.ID {
				t.Fatalf("answered payout %d, the ledger's is %d", p.ID, got.ID)
			}
		})
	}
}

// A completed payout whose record is lost is answered from the ledger:
// the same payout and charge, no second debit, no call to the provider.
func TestPayoutRedisLostAfterCompletion(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := setupLoss(t, b, nil)
			p := decodePayout(t, e.pay("k1", "alice", 100))
			e.flush()
			calls := e.prov.TotalRequests()
			again := decodePayout(t, e.pay("k1", "alice", 100))
			if again != p {
				t.Fatalf("retry after the loss %+v, want the payout %+v", again, p)
			}
			if n := e.prov.TotalRequests(); n != calls {
				t.Fatalf("the retry called the provider %d times, want 0", n-calls)
			}
			e.checkOnce("k1", "alice", transfers.PayoutCompleted, 900)
			if rep := e.scan(); rep.Found != 0 {
				t.Fatalf("scan %+v, want nothing", rep)
			}
		})
	}
}

// The ledger binds a key to its payout for Config.KeyTTL. Within it, a
// request with the key and another body, its record lost, is refused
// (422 key-reused) and does nothing. After it, the record expired, the
// key names a new payout: it is debited, and the first one's row neither
// blocks it nor is changed (a provider that still remembers the key
// answers with the first charge, which leaves the new one pending for a
// human: docs/PAYOUTS.md, "What can still go wrong").
func TestPayoutKeyTTL(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			skew := time.Duration(0)
			e := setupLoss(t, b, func(c *transfers.Config) {
				c.KeyTTL = time.Hour
				c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(skew) }
			})
			first := decodePayout(t, e.pay("k1", "alice", 100))
			e.flush()
			r := e.pay("k1", "alice", 200)
			if r.status != http.StatusUnprocessableEntity || !strings.HasSuffix(problemType(t, r), "/key-reused") {
				t.Fatalf("another body within KeyTTL: %d %s, want 422 key-reused", r.status, r.body)
			}
			e.checkOnce("k1", "alice", transfers.PayoutCompleted, 900)

			e.flush() // as the record of the 422 expires
			mu.Lock()
			skew = 2 * time.Hour
			mu.Unlock()
			r = e.pay("k1", "alice", 100)
			l := e.payouts()
			if len(l.Payouts) != 2 || l.Payouts[0].State != transfers.PayoutCompleted || l.Payouts[0].ProviderChargeID != first.ProviderChargeID {
				t.Fatalf("payouts %+v (answer %d %s), want the first one completed as it was and a new one", l, r.status, r.body)
			}
			if l.Payouts[1].ProviderChargeID == first.ProviderChargeID || e.balance("alice") != 800 {
				t.Fatalf("payouts %+v, balance %d: want the new payout debited and not paid by the first charge", l, e.balance("alice"))
			}
		})
	}
}

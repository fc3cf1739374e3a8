package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/mysqltest"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/redistest"
)

// payoutDBs are the databases the payout e2e tests run on, as idem serve
// flags: a SQLite file (one process at a time), a PostgreSQL schema, a
// MySQL (MariaDB) database, and the payouts' leased records on Redis with
// the ledger on a SQLite file.
var payoutDBs = []struct {
	name string
	db   func(t *testing.T) []string
}{
	{"SQLite", func(t *testing.T) []string { return []string{"-db", filepath.Join(t.TempDir(), "payouts.db")} }},
	{"Postgres", func(t *testing.T) []string { _, dsn := pgtest.Schema(t); return []string{"-db", dsn} }},
	{"MySQL", func(t *testing.T) []string {
		_, dsn := mysqltest.Database(t)
		return []string{"-db", mysqltest.URL(t, dsn)}
	}},
	{"Redis", func(t *testing.T) []string {
		return []string{"-db", redisDB(t), "-ledger", filepath.Join(t.TempDir(), "ledger.db")}
	}},
}

// redisDB returns the -db of a Redis store of the test's own keys (a
// ?prefix= no other test uses), deleted when the test ends.
func redisDB(t *testing.T) string {
	t.Helper()
	c := redistest.Client(t)
	return "redis://" + redistest.Require(t) + "/0?prefix=" + redistest.Name(t, c)
}

// payoutAmount is what every e2e payout takes from alice's 1000.
const payoutAmount = 100

func payoutBody() string { return fmt.Sprintf(`{"account":"alice","amount":%d}`, payoutAmount) }

// anonymousChargeKey is the derived key of an anonymous payout with key.
func anonymousChargeKey(key string) string {
	return idem.DerivedKey(idem.StoredScope("anonymous"), key, "charge")
}

// kill sends SIGKILL and waits for the process to end.
func (s *server) kill(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed process did not end within 30s")
	}
}

func (s *server) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// postAsync sends POST /payouts in the background; the channel gets its
// status (0 if the connection failed).
func (s *server) postAsync(key string) <-chan int {
	ch := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+s.addr+"/payouts", strings.NewReader(payoutBody()))
		req.Header.Set("Idempotency-Key", key)
		res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			ch <- 0
			return
		}
		res.Body.Close()
		ch <- res.StatusCode
	}()
	return ch
}

type e2ePayout struct {
	ID               int64  `json:"id"`
	Account          string `json:"account"`
	Amount           int64  `json:"amount"`
	State            string `json:"state"`
	ProviderChargeID string `json:"provider_charge_id"`
}

func (s *server) payoutList(t *testing.T) []e2ePayout {
	t.Helper()
	status, body := s.do(t, "GET", "/payouts", "", "")
	var l struct {
		Payouts []e2ePayout
		Count   int
	}
	if status != 200 || json.Unmarshal([]byte(body), &l) != nil || l.Count != len(l.Payouts) {
		t.Fatalf("GET /payouts: %d %s", status, body)
	}
	return l.Payouts
}

func (s *server) balance(t *testing.T, id string) int64 {
	t.Helper()
	status, body := s.do(t, "GET", "/accounts/"+id, "", "")
	var a struct{ Balance int64 }
	if status != 200 || json.Unmarshal([]byte(body), &a) != nil {
		t.Fatalf("GET /accounts/%s: %d %s", id, status, body)
	}
	return a.Balance
}

func waitHeld(t *testing.T, prov *fakeprovider.Provider) {
	t.Helper()
	select {
	case <-prov.Held():
	case <-time.After(30 * time.Second):
		t.Fatal("the provider got no call within 30s")
	}
}

// waitFor polls cond every 100ms for up to 60s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 600 {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within 60s", what)
}

// crashPayout starts idem serve -provider on db (its database flags), sends a payout with key
// and kills the process with SIGKILL at point: "before" the provider
// applies anything (the call is dropped), "during" the call (the provider
// applies it after the process died) or "after" it (the provider applied
// and answered; the process was stopped before it could read the answer).
// It returns once the provider is done with the call.
func crashPayout(t *testing.T, db []string, providerURL string, prov *fakeprovider.Provider, key, point string) {
	t.Helper()
	s := startServe(t, append(db, "-provider", providerURL, "-lease", "2s", "-complete-interval", "1h")...)
	if status, body := s.do(t, "PUT", "/accounts/alice", "", `{"balance":1000}`); status != 200 {
		t.Fatalf("PUT /accounts/alice: %d %s", status, body)
	}
	if point == "before" {
		prov.Inject(fakeprovider.HoldThenDrop)
	} else {
		prov.Inject(fakeprovider.Hold)
	}
	s.postAsync(key)
	waitHeld(t, prov)
	switch point {
	case "before":
		s.kill(t)
		prov.Release()
	case "during":
		s.kill(t)
		prov.Release()
		waitFor(t, "the held charge applied", func() bool { return prov.Effects(anonymousChargeKey(key)) == 1 })
	case "after":
		s.signal(t, syscall.SIGSTOP)
		prov.Release()
		waitFor(t, "the held charge applied", func() bool { return prov.Effects(anonymousChargeKey(key)) == 1 })
		time.Sleep(200 * time.Millisecond) // the answer reaches the stopped process's socket
		s.kill(t)
	}
	if n := len(prov.Charges()); point == "before" && n != 0 {
		t.Fatalf("%d charges after a crash before the call, want 0", n)
	}
}

// checkReconciled checks that the one payout of key is completed with the
// one charge the provider applied, and that alice was debited once.
func checkReconciled(t *testing.T, s *server, prov *fakeprovider.Provider, key string) e2ePayout {
	t.Helper()
	charges := prov.Charges()
	if len(charges) != 1 || prov.Effects(anonymousChargeKey(key)) != 1 {
		t.Fatalf("charges %+v, want exactly one, under the derived key", charges)
	}
	l := s.payoutList(t)
	if len(l) != 1 || l[0].State != "completed" || l[0].ProviderChargeID != charges[0].ID || l[0].Amount != payoutAmount {
		t.Fatalf("payouts %+v, want one completed with charge %s", l, charges[0].ID)
	}
	if got := s.balance(t, "alice"); got != 1000-payoutAmount {
		t.Fatalf("alice's balance %d, want %d (one debit)", got, 1000-payoutAmount)
	}
	return l[0]
}

// A payout whose process is killed with SIGKILL before, during or after
// the provider call is finished, with exactly one charge and one debit,
// (a) by its client's retry, with no completer running, and (b) by the
// completer alone, with no retry; the client's later retry gets the
// completer's answer.
func TestPayoutE2ECrashResumed(t *testing.T) {
	t.Parallel()
	for _, d := range payoutDBs {
		for _, point := range []string{"before", "during", "after"} {
			for _, by := range []string{"Retry", "Completer"} {
				t.Run(d.name+"/"+point+"/"+by, func(t *testing.T) {
					t.Parallel()
					db := d.db(t)
					prov, url := fakeprovider.Start(t, nil)
					key := "crash-" + point + "-" + by
					crashPayout(t, db, url, prov, key, point)

					interval := "1h"
					if by == "Completer" {
						interval = "500ms"
					}
					killed := time.Now()
					s := startServe(t, append(db, "-provider", url, "-lease", "2s", "-complete-interval", interval)...)
					if by == "Retry" {
						var status int
						var body string
						waitFor(t, "the retry answered 201", func() bool {
							status, body = s.do(t, "POST", "/payouts", key, payoutBody())
							if status != 201 && status != 409 {
								t.Fatalf("retry: %d %s, want 201 (or 409 while the dead holder's lease lasts)", status, body)
							}
							return status == 201
						})
						p := checkReconciled(t, s, prov, key)
						if !strings.Contains(body, `"provider_charge_id":"`+p.ProviderChargeID+`"`) {
							t.Fatalf("the retry's answer %s lacks the charge %s", body, p.ProviderChargeID)
						}
						return
					}
					waitFor(t, "the completer finished the payout", func() bool {
						l := s.payoutList(t)
						return len(l) == 1 && l[0].State == "completed"
					})
					// The figure docs/BENCHMARKS.md reports: from the kill to
					// the completer's completion (lease 2 s, interval 500 ms).
					t.Logf("recovered by the completer alone %s after the kill", time.Since(killed).Round(10*time.Millisecond))
					p := checkReconciled(t, s, prov, key)
					// The ledger shows the payout completed a moment before
					// the completer completes its record: until then a retry
					// is refused as in flight (409), as the contract says.
					var res *http.Response
					var got e2ePayout
					var err error
					waitFor(t, "the retry answered other than 409 in flight", func() bool {
						req, _ := http.NewRequest("POST", "http://"+s.addr+"/payouts", strings.NewReader(payoutBody()))
						req.Header.Set("Idempotency-Key", key)
						res, err = http.DefaultClient.Do(req)
						if err != nil {
							t.Fatal(err)
						}
						got = e2ePayout{}
						err = json.NewDecoder(res.Body).Decode(&got)
						res.Body.Close()
						return res.StatusCode != http.StatusConflict
					})
					if err != nil || res.StatusCode != 201 || res.Header.Get("Idempotent-Replayed") != "true" || got.ID != p.ID || got.ProviderChargeID != p.ProviderChargeID {
						t.Fatalf("retry after the completer: %d %+v (replayed %q), want the completer's 201 replayed", res.StatusCode, got, res.Header.Get("Idempotent-Replayed"))
					}
					_, metrics := s.do(t, "GET", "/metrics", "", "")
					if want := `idem_completer_records_total{kind="http:payouts",outcome="completed"} 1`; !strings.Contains(metrics, want) {
						t.Fatalf("/metrics lacks %q", want)
					}
				})
			}
		}
	}
}

// A live but slow holder (SIGSTOP past its lease) is taken over by a
// second instance, whose completer finishes the payout; when the first
// wakes up (SIGCONT) with the provider's answer, its late writes apply
// nothing: no second payout, no second charge, the answer unchanged.
// PostgreSQL only: two processes on one database (a SQLite file takes one).
func TestPayoutE2ESlowHolderFenced(t *testing.T) {
	t.Parallel()
	for _, onRedis := range []bool{false, true} {
		name := "Postgres"
		if onRedis {
			name = "Redis+Postgres"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, dsn := pgtest.Schema(t)
			db := []string{"-db", dsn}
			if onRedis {
				db = []string{"-db", redisDB(t), "-ledger", dsn}
			}
			slowHolderFenced(t, db)
		})
	}
}

func slowHolderFenced(t *testing.T, db []string) {
	prov, url := fakeprovider.Start(t, nil)
	a := startServe(t, append(db, "-provider", url, "-lease", "2s", "-complete-interval", "1h")...)
	if status, body := a.do(t, "PUT", "/accounts/alice", "", `{"balance":1000}`); status != 200 {
		t.Fatalf("PUT /accounts/alice: %d %s", status, body)
	}
	const key = "slow-holder"
	prov.Inject(fakeprovider.Hold)
	answerA := a.postAsync(key)
	waitHeld(t, prov)
	a.signal(t, syscall.SIGSTOP)
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	})

	b := startServe(t, append(db, "-provider", url, "-lease", "2s", "-complete-interval", "500ms")...)
	waitFor(t, "the second instance's completer finished the payout", func() bool {
		l := b.payoutList(t)
		return len(l) == 1 && l[0].State == "completed"
	})
	p := checkReconciled(t, b, prov, key)
	status, first := b.do(t, "POST", "/payouts", key, payoutBody())
	if status != 201 {
		t.Fatalf("retry on the second instance: %d %s", status, first)
	}

	prov.Release() // the first holder's call gets the charge's answer
	a.signal(t, syscall.SIGCONT)
	stopped = false
	select {
	case st := <-answerA:
		if st == 201 {
			t.Fatalf("the fenced holder answered 201: it must not give an answer of its own")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the first holder did not answer within 60s of SIGCONT")
	}
	if got := checkReconciled(t, b, prov, key); got != p {
		t.Fatalf("payout after the late holder woke: %+v, want %+v", got, p)
	}
	if n := prov.Requests(anonymousChargeKey(key)); n != 2 {
		t.Fatalf("%d provider calls under the key, want 2 (the slow holder's and the completer's)", n)
	}
	for _, s := range []*server{a, b} {
		if status, again := s.do(t, "POST", "/payouts", key, payoutBody()); status != 201 || again != first {
			t.Fatalf("retry on %s: %d %s, want the first answer %s", s.addr, status, again, first)
		}
	}
}

// A payout whose provider never answers definitively stays pending and
// debited (never compensated); past -report-after the completer logs it
// at ERROR as needing a human and counts it in idem_completer_stuck_total.
func TestPayoutE2EStuckReported(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(down.Close)
	s := startServe(t, "-db", filepath.Join(t.TempDir(), "stuck.db"), "-provider", down.URL,
		"-lease", "2s", "-complete-interval", "500ms", "-report-after", "1s")
	if status, body := s.do(t, "PUT", "/accounts/alice", "", `{"balance":1000}`); status != 200 {
		t.Fatalf("PUT /accounts/alice: %d %s", status, body)
	}
	if status, body := s.do(t, "POST", "/payouts", "stuck", payoutBody()); status != 503 {
		t.Fatalf("POST /payouts: %d %s, want 503", status, body)
	}
	waitFor(t, "the needs-a-human log line", func() bool {
		log := s.stderr.String()
		return strings.Contains(log, "level=ERROR") && strings.Contains(log, "needs a human")
	})
	_, metrics := s.do(t, "GET", "/metrics", "", "")
	const series = `idem_completer_stuck_total{kind="http:payouts"} `
	if i := strings.Index(metrics, series); i < 0 || strings.HasPrefix(metrics[i+len(series):], "0\n") {
		t.Fatalf("/metrics: %s is missing or zero", series)
	}
	if l := s.payoutList(t); len(l) != 1 || l[0].State != "pending" {
		t.Fatalf("payouts %+v, want one pending", l)
	}
	if got := s.balance(t, "alice"); got != 1000-payoutAmount {
		t.Fatalf("balance %d, want %d: an unknown outcome is never credited back", got, 1000-payoutAmount)
	}
	if calls.Load() <= 3 {
		t.Fatalf("%d provider calls, want the completer's retries after the request's 3", calls.Load())
	}
}

// idem complete makes one completer pass and says what it did; it exits 1
// when the store fails.
func TestPayoutE2ECompleteCommand(t *testing.T) {
	t.Parallel()
	for _, d := range payoutDBs[:3] { // SQLite, PostgreSQL, MySQL
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db := d.db(t)
			prov, url := fakeprovider.Start(t, nil)
			const key = "complete-cmd"
			crashPayout(t, db, url, prov, key, "during")
			time.Sleep(2500 * time.Millisecond) // the dead holder's 2s lease ends
			out, err := exec.Command(binary, append(append([]string{"complete"}, db...), "-provider", url, "-lease", "2s")...).Output()
			if err != nil || !strings.Contains(string(out), "found 1 abandoned record(s): 1 completed") {
				t.Fatalf("idem complete: %v\n%s", err, out)
			}
			s := startServe(t, append(db, "-provider", url, "-complete-interval", "1h")...)
			checkReconciled(t, s, prov, key)
			s.kill(t)
		})
	}

	out, err := exec.Command(binary, "complete", "-db", "postgres://postgres@127.0.0.1:1/none?connect_timeout=5", "-provider", "http://127.0.0.1:1").CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "store unavailable") {
		t.Fatalf("idem complete on an unreachable store: %v %s, want exit status 1", err, out)
	}
	out, err = exec.Command(binary, "serve", "-db", filepath.Join(t.TempDir(), "x.db"), "-lease", "2s").CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "-provider") {
		t.Fatalf("serve -lease without -provider: %v %s, want exit status 2", err, out)
	}
}

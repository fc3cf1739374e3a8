package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemwebhook"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/internal/pgtest"
)

// Two Standard Webhooks secrets (the old and the new of a rotation) and
// one the server does not know.
const (
	hookOld     = "whsec_b2xkLXNlY3JldC1vZi10aGUtZGVwb3NpdHMtZW5kcG9pbnQ="
	hookNew     = "whsec_bmV3LXNlY3JldC1vZi10aGUtZGVwb3NpdHMtZW5kcG9pbnQ="
	hookUnknown = "whsec_c29tZW9uZS1lbHNlcy1zZWNyZXQ="
)

var webhookDBs = []struct {
	name string
	db   func(t *testing.T) []string
}{
	{"SQLite", func(t *testing.T) []string { return []string{"-db", filepath.Join(t.TempDir(), "hooks.db")} }},
	{"Postgres", func(t *testing.T) []string { _, dsn := pgtest.Schema(t); return []string{"-db", dsn} }},
	{"MySQL", func(t *testing.T) []string {
		_, dsn := mysqltest.Database(t)
		return []string{"-db", mysqltest.URL(t, dsn)}
	}},
}

func webhookArgs(db []string) []string {
	return append(db, "-webhook-secret", hookOld, "-webhook-secret", hookNew)
}

// startServeAt is startServe on a given address, so that a restarted
// server is found where the provider delivers.
func startServeAt(t *testing.T, addr string, args ...string) *server {
	t.Helper()
	s := &server{addr: addr, stderr: new(lockedBuffer), exited: make(chan error, 1)}
	s.cmd = exec.Command(binary, append([]string{"serve", "-addr", addr}, args...)...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() { _ = s.cmd.Process.Kill() })
	waitFor(t, "idem serve healthy on "+addr, func() bool {
		select {
		case err := <-s.exited:
			t.Fatalf("idem serve exited at start: %v\n%s", err, s.stderr)
		default:
		}
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	return s
}

type e2eDeposit struct {
	DepositID string `json:"deposit_id"`
	WebhookID string `json:"webhook_id"`
	Account   string `json:"account"`
	Amount    int64  `json:"amount"`
}

func (s *server) deposits(t *testing.T) []e2eDeposit {
	t.Helper()
	status, body := s.do(t, "GET", "/deposits", "", "")
	var l struct {
		Count    int
		Deposits []e2eDeposit
	}
	if status != 200 || json.Unmarshal([]byte(body), &l) != nil || l.Count != len(l.Deposits) {
		t.Fatalf("GET /deposits: %d %s", status, body)
	}
	return l.Deposits
}

func problemType(body []byte) string {
	var p idemhttp.Problem
	_ = json.Unmarshal(body, &p)
	return p.Type
}

// Every answer of POST /webhooks/deposits, against the real process: a
// deposit credited once whatever secret of the rotation signed it; unknown
// types acknowledged and recorded; refusals recorded as 422; every
// rejection 401 (or 409) with nothing applied; the secrets never logged.
func TestWebhookDepositsE2E(t *testing.T) {
	for _, tt := range webhookDBs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServe(t, webhookArgs(tt.db(t))...)
			if status, body := s.do(t, "PUT", "/accounts/a", "", `{"balance":100}`); status != 200 {
				t.Fatalf("PUT: %d %s", status, body)
			}
			ctx := context.Background()
			w := &fakeprovider.Webhooks{URL: "http://" + s.addr + "/webhooks/deposits", Secret: hookOld}
			send := func(d fakeprovider.Delivery, want int) fakeprovider.Answer {
				t.Helper()
				a, err := w.Send(ctx, d)
				if err != nil || a.Status != want {
					t.Fatalf("%s: %d %s (%v), want %d", d.ID, a.Status, a.Body, err, want)
				}
				return a
			}
			dep := fakeprovider.DepositEvent("dep_1", "a", 25)
			first := send(fakeprovider.Delivery{ID: "msg_1", Body: dep}, 200)
			again := send(fakeprovider.Delivery{ID: "msg_1", Body: dep, Secret: hookNew}, 200)
			if !again.Replayed || !bytes.Equal(first.Body, again.Body) {
				t.Fatalf("redelivery: replayed %v, %s vs %s", again.Replayed, again.Body, first.Body)
			}
			// Rejections: none applies anything, none is recorded.
			send(fakeprovider.Delivery{ID: "msg_2", Body: dep, Secret: hookUnknown}, 401)
			send(fakeprovider.Delivery{ID: "msg_2", Body: dep, Forge: true}, 401)
			stale := send(fakeprovider.Delivery{ID: "msg_2", Body: dep, Skew: -idemwebhook.DefaultTolerance - time.Minute}, 401)
			future := send(fakeprovider.Delivery{ID: "msg_2", Body: dep, Skew: idemwebhook.DefaultTolerance + time.Minute}, 401)
			if problemType(stale.Body) != idemwebhook.ProblemBase+"stale-timestamp" || problemType(future.Body) != idemwebhook.ProblemBase+"future-timestamp" {
				t.Fatalf("skew: %s / %s", stale.Body, future.Body)
			}
			// A captured signature replayed under a new webhook-id.
			req, _ := http.NewRequest("POST", w.URL, bytes.NewReader(dep))
			_ = idemwebhook.StandardHeaders(req.Header, hookOld, "msg_1", time.Now(), dep)
			req.Header.Set("Webhook-Id", "msg_2")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 401 {
				t.Fatalf("replayed signature with a new webhook-id: %d", res.StatusCode)
			}
			conflict := send(fakeprovider.Delivery{ID: "msg_1", Body: fakeprovider.DepositEvent("dep_1", "a", 2500)}, 409)
			if problemType(conflict.Body) != idemwebhook.ProblemBase+"conflict" {
				t.Fatalf("conflict: %s", conflict.Body)
			}
			// msg_2 was never recorded: signed correctly now, it applies.
			send(fakeprovider.Delivery{ID: "msg_2", Body: fakeprovider.DepositEvent("dep_2", "a", 5)}, 200)

			ignored := fakeprovider.Delivery{ID: "msg_3", Body: []byte(`{"type":"deposit.reversed","data":{}}`)}
			send(ignored, 200)
			if a := send(ignored, 200); !a.Replayed {
				t.Fatal("an ignored type's redelivery was not replayed")
			}
			for i, body := range [][]byte{fakeprovider.DepositEvent("dep_4", "nobody", 5), fakeprovider.DepositEvent("dep_5", "a", 0), fakeprovider.DepositEvent("dep_6", "a", -3)} {
				d := fakeprovider.Delivery{ID: fmt.Sprintf("msg_refused_%d", i), Body: body}
				send(d, 422)
				if a := send(d, 422); !a.Replayed {
					t.Fatalf("%s: the 422 was not recorded", d.ID)
				}
			}
			if got := s.balance(t, "a"); got != 130 {
				t.Fatalf("balance %d, want 130", got)
			}
			deps := s.deposits(t)
			want := []e2eDeposit{{"dep_1", "msg_1", "a", 25}, {"dep_2", "msg_2", "a", 5}}
			if fmt.Sprint(deps) != fmt.Sprint(want) {
				t.Fatalf("deposits %v, want %v", deps, want)
			}
			for _, secret := range []string{hookOld, hookNew, strings.TrimPrefix(hookOld, "whsec_")} {
				if strings.Contains(s.stderr.String(), secret) {
					t.Fatalf("a secret is in the log:\n%s", s.stderr)
				}
			}
		})
	}
}

// The provider storm: hundreds of deposits, each delivered 1 to 5 times
// (some at once, out of order), interleaved with forged, stale and
// unknown-secret deliveries, while idem serve is SIGKILLed and restarted;
// then same-id-other-body deliveries and a redelivery of every event.
// Afterwards every valid deposit is applied exactly once, nothing else is,
// and money is conserved.
func TestWebhookStormE2E(t *testing.T) {
	for _, tt := range webhookDBs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			webhookStorm(t, webhookArgs(tt.db(t)))
		})
	}
}

func webhookStorm(t *testing.T, args []string) {
	const (
		nAccounts = 8
		initial   = 1000
		nValid    = 240
		kills     = 3
	)
	addr := freePort(t)
	s := startServeAt(t, addr, args...)
	for i := range nAccounts {
		if status, body := s.do(t, "PUT", fmt.Sprintf("/accounts/acct%d", i), "", fmt.Sprintf(`{"balance":%d}`, initial)); status != 200 {
			t.Fatalf("PUT: %d %s", status, body)
		}
	}
	seed := e2eSeed(t)
	rng := rand.New(rand.NewPCG(seed, 17))
	type want struct {
		account string
		amount  int64
		status  int
	}
	wants := map[string]want{}
	var events []fakeprovider.Delivery
	for i := range nValid {
		id := fmt.Sprintf("msg_%d", i)
		acct, amount := fmt.Sprintf("acct%d", rng.IntN(nAccounts)), int64(1+rng.IntN(100))
		secret := hookOld
		if rng.IntN(2) == 0 {
			secret = hookNew
		}
		events = append(events, fakeprovider.Delivery{ID: id, Body: fakeprovider.DepositEvent("dep_"+id, acct, amount), Secret: secret})
		wants[id] = want{acct, amount, 200}
	}
	for i := range 20 {
		id := fmt.Sprintf("msg_noacct_%d", i)
		events = append(events, fakeprovider.Delivery{ID: id, Body: fakeprovider.DepositEvent("dep_"+id, "nobody", 5)})
		wants[id] = want{status: 422}
		id = fmt.Sprintf("msg_other_%d", i)
		events = append(events, fakeprovider.Delivery{ID: id, Body: []byte(`{"type":"payout.paid","data":{"amount":5}}`)})
		wants[id] = want{status: 200}
	}
	// Invalid deliveries, some under the ids of valid events: refused
	// whenever they arrive, they record nothing that stops the real one.
	var invalid []fakeprovider.Delivery
	for i := range 40 {
		id := fmt.Sprintf("msg_%d", rng.IntN(nValid))
		if i%2 == 0 {
			id = fmt.Sprintf("msg_bad_%d", i)
		}
		body := fakeprovider.DepositEvent("dep_forged", "acct0", 1_000_000)
		switch i % 4 {
		case 0, 1:
			invalid = append(invalid, fakeprovider.Delivery{ID: id, Body: body, Forge: true})
		case 2:
			invalid = append(invalid, fakeprovider.Delivery{ID: id, Body: body, Skew: -2 * idemwebhook.DefaultTolerance})
		default:
			invalid = append(invalid, fakeprovider.Delivery{ID: id, Body: body, Secret: hookUnknown})
		}
	}

	var answered atomic.Int64
	client := &http.Client{Timeout: 10 * time.Second, Transport: countingTransport{http.DefaultTransport, &answered}}
	w := &fakeprovider.Webhooks{URL: "http://" + addr + "/webhooks/deposits", Secret: hookOld, Client: client}
	ctx := context.Background()
	type stormResult struct {
		answers map[string][][]fakeprovider.Answer
		err     error
	}
	validDone, invalidDone := make(chan stormResult, 1), make(chan stormResult, 1)
	go func() {
		a, err := w.Storm(ctx, events, fakeprovider.StormConfig{Seed: seed, Concurrency: 8})
		validDone <- stormResult{a, err}
	}()
	go func() {
		a, err := w.Storm(ctx, invalid, fakeprovider.StormConfig{Seed: seed + 1, Concurrency: 2, MaxCopies: 2})
		invalidDone <- stormResult{a, err}
	}()
	// SIGKILL while deliveries are in flight, then restart on the same
	// address; the provider keeps retrying meanwhile.
	for k := range kills {
		threshold := int64(150 * (k + 1))
		waitFor(t, fmt.Sprintf("%d answers before kill %d", threshold, k+1), func() bool { return answered.Load() >= threshold })
		s.kill(t)
		s = startServeAt(t, addr, args...)
	}
	valid, bad := <-validDone, <-invalidDone
	if valid.err != nil || bad.err != nil {
		t.Fatalf("storm: %v / %v", valid.err, bad.err)
	}
	for id, copies := range valid.answers {
		var body []byte
		for _, c := range copies {
			last := c[len(c)-1]
			if last.Status != wants[id].status {
				t.Fatalf("%s: final answer %d %s, want %d", id, last.Status, last.Body, wants[id].status)
			}
			if body != nil && !bytes.Equal(body, last.Body) {
				t.Fatalf("%s: two copies answered differently: %s / %s", id, body, last.Body)
			}
			body = last.Body
		}
	}
	for id, copies := range bad.answers {
		for _, c := range copies {
			if last := c[len(c)-1]; last.Status != 401 {
				t.Fatalf("invalid %s: %d %s", id, last.Status, last.Body)
			}
		}
	}
	// After the storm: the same ids with another body conflict, and every
	// event's redelivery is a replay.
	for i := range 30 {
		id := fmt.Sprintf("msg_%d", i)
		a, err := w.Send(ctx, fakeprovider.Delivery{ID: id, Body: fakeprovider.DepositEvent("dep_"+id, "acct0", 99_999)})
		if err != nil || a.Status != 409 || problemType(a.Body) != idemwebhook.ProblemBase+"conflict" {
			t.Fatalf("%s with another body: %d %s %v", id, a.Status, a.Body, err)
		}
	}
	for _, e := range events {
		a, err := w.Send(ctx, e)
		if err != nil || a.Status != wants[e.ID].status || !a.Replayed {
			t.Fatalf("%s redelivered: %d replayed %v %v", e.ID, a.Status, a.Replayed, err)
		}
	}

	deps := s.deposits(t)
	if len(deps) != nValid {
		t.Fatalf("%d deposits, want %d", len(deps), nValid)
	}
	balances := make(map[string]int64)
	var total int64
	for _, d := range deps {
		w, ok := wants[d.WebhookID]
		if !ok || w.status != 200 || w.account == "" || d.Account != w.account || d.Amount != w.amount || d.DepositID != "dep_"+d.WebhookID {
			t.Fatalf("deposit %+v is not a valid event's (%+v)", d, w)
		}
		delete(wants, d.WebhookID) // a second deposit of one id fails above
		balances[d.Account] += d.Amount
		total += d.Amount
	}
	var sum int64
	for i := range nAccounts {
		id := fmt.Sprintf("acct%d", i)
		got := s.balance(t, id)
		if got != initial+balances[id] {
			t.Errorf("%s: balance %d, want %d", id, got, initial+balances[id])
		}
		sum += got
	}
	if sum != nAccounts*initial+total {
		t.Fatalf("money not conserved: %d, want %d", sum, nAccounts*initial+total)
	}
	t.Logf("seed %d: %d deposits applied once, %d attempts answered, %d kills", seed, len(deps), answered.Load(), kills)
}

// countingTransport counts the attempts that got an answer.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.rt.RoundTrip(r)
	if err == nil {
		c.n.Add(1)
	}
	return res, err
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/servertest"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/internal/history"
	"github.com/idemkit/idem/internal/pgcluster"
	"github.com/idemkit/idem/internal/redistest"
)

// failoverIntents is the number of intents of one failover run:
// IDEM_FAILOVER_INTENTS, or a small default for CI (docs/BENCHMARKS.md,
// "Failover", has the bigger runs).
func failoverIntents(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("IDEM_FAILOVER_INTENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 {
			t.Fatalf("IDEM_FAILOVER_INTENTS=%q: want a number of at least 10", v)
		}
		return n
	}
	return 150
}

// failoverClients is how many clients send the intents at once.
const failoverClients = 8

// op is one request of a failover run and its answer, as the client saw
// it: the history of the run.
type op struct {
	Key        string
	Start, End time.Time
	Status     int    // 0: no answer (connection refused or reset, timeout)
	Digest     string // SHA-256 of the answer's body
	Replayed   bool   // Idempotent-Replayed: true
	ID         int64  // the id of the transfer or payout answered, if any
}

// runHistory collects the ops of a run from many goroutines, and the same
// requests as internal/history's operations, for the linearizability
// check.
type runHistory struct {
	rec history.Recorder
	mu  sync.Mutex
	ops []op
}

func (h *runHistory) add(o op) {
	h.mu.Lock()
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

// check checks the run's history with internal/history. With lost == 0 it
// must be linearizable (history.Require fails the test and writes the
// visualization otherwise). With acknowledged results lost by an
// asynchronous failover it must not be: a key answered with one result
// and later, after the loss, with another is exactly what the checker
// exists to see.
func (h *runHistory) check(t *testing.T, lost int) {
	t.Helper()
	if lost == 0 {
		history.Require(t, &h.rec)
		return
	}
	res := history.Check(h.rec.Ops(), 0)
	if res.Ok {
		t.Fatalf("history: %s, but %d acknowledged results were lost: the checker missed them", res, lost)
	}
	t.Logf("history: %s (the %d lost results, as expected)", res, lost)
}

// intent is what one key's client ended with.
type intent struct {
	key      string
	acked    bool   // answered 201 (first execution or replay)
	id       int64  // the id of that answer
	digest   string // the SHA-256 of its body
	attempts int
}

// send sends one request with key and body to s and records it in h.
func send(c *http.Client, h *runHistory, client int, addr, path, key, body string) op {
	o := op{Key: key, Start: time.Now()}
	p := h.rec.Begin(client, key)
	req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	var b []byte
	if err == nil {
		b, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err == nil {
			o.Status = res.StatusCode
			sum := sha256.Sum256(b)
			o.Digest = hex.EncodeToString(sum[:])
			o.Replayed = res.Header.Get("Idempotent-Replayed") == "true"
			var v struct{ ID int64 }
			if json.Unmarshal(b, &v) == nil {
				o.ID = v.ID
			}
		}
	}
	o.End = time.Now()
	status := 0
	if res != nil {
		status = res.StatusCode
	}
	p.End(history.FromHTTP(status, o.Replayed, b, err))
	h.add(o)
	return o
}

// runIntents sends n intents (key prefix+i, body body(i)) from
// failoverClients clients, each retried every 50ms until it is answered
// 201, for at most two minutes per intent. acked is called after each
// acknowledged intent with the number acknowledged so far.
func runIntents(t *testing.T, h *runHistory, addr, path, prefix string, n int, body func(i int) string, acked func(int64)) []intent {
	t.Helper()
	out := make([]intent, n)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	c := &http.Client{Timeout: 15 * time.Second}
	for client := range failoverClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				in := intent{key: prefix + strconv.Itoa(i)}
				deadline := time.Now().Add(2 * time.Minute)
				for time.Now().Before(deadline) {
					in.attempts++
					if o := send(c, h, client+1, addr, path, in.key, body(i)); o.Status == 201 {
						in.acked, in.id, in.digest = true, o.ID, o.Digest
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				out[i] = in
				if in.acked {
					acked(done.Add(1))
				}
			}
		})
	}
	wg.Wait()
	return out
}

// sendUntilSettled sends key once more, as a client does after the
// failover, and again while it is answered 409 (for at most 30 s, every
// 100 ms): a leased record whose completion the failover lost is pending
// on the promoted server, its lease taken before the failover, and the key
// is in flight until that lease ends and a retry (or the completer) takes
// it over.
func sendUntilSettled(h *runHistory, addr, path, key, body string) op {
	deadline := time.Now().Add(30 * time.Second)
	for {
		o := send(http.DefaultClient, h, 0, addr, path, key, body)
		if o.Status != 409 || time.Now().After(deadline) {
			return o
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replays reports whether o, a later send of in's key, is a replay of
// the answer in was acknowledged with. A send that is not (its key ran
// again, or answered another body) is a result lost by the failover,
// even when the new answer carries the same id: the history checker
// sees it as a violation either way.
func (in intent) replays(o op) bool {
	return o.Status == 201 && o.Replayed && o.Digest == in.digest
}

// failover kills the cluster's primary with SIGKILL once after acks
// intents were acknowledged, and promotes the standby 300ms later, as a
// failover manager would after noticing. It returns the trigger for
// runIntents and a wait for the promotion.
func failover(t *testing.T, c *pgcluster.Cluster, after int64) (trigger func(int64), wait func()) {
	var once sync.Once
	promoted := make(chan error, 1)
	trigger = func(acked int64) {
		if acked < after {
			return
		}
		once.Do(func() {
			c.Primary.Kill()
			go func() {
				time.Sleep(300 * time.Millisecond)
				promoted <- c.Standby.Promote(context.Background())
			}()
		})
	}
	wait = func() {
		t.Helper()
		select {
		case err := <-promoted:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("the primary was never killed: too few intents acknowledged")
		}
	}
	return trigger, wait
}

// failoverModes are the replications the failover tests run on.
var failoverModes = []struct {
	name string
	sync bool
}{{"Sync", true}, {"Async", false}}

// The transfers service on a primary and a standby reached through a
// multi-host URL (target_session_attrs=read-write): the primary is
// killed with SIGKILL a third of the way through the intents and the
// standby promoted, while retrying clients send one key per intent.
//
// Every intent is acknowledged in the end and, once each acknowledged key
// is sent once more, has exactly one transfer. With synchronous
// replication no acknowledged intent is lost: every later send is a
// replay of the acknowledged answer. With asynchronous replication the
// commits the standby had not received when the primary died are gone,
// record and transfer together: the test counts them (an acknowledged id
// that no longer exists, and whose key runs again when sent again) and
// logs the count; it is what the documentation's figures are made of.
func TestFailoverE2ETransfers(t *testing.T) {
	servertest.Cluster(t)
	t.Parallel()
	for _, m := range failoverModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			c := pgcluster.Start(t, pgcluster.Options{Sync: m.sync})
			s := startServe(t, "-db", c.URL("postgres"), "-request-timeout", "5s")
			for _, a := range []string{"alice", "bob"} {
				if status, body := s.do(t, "PUT", "/accounts/"+a, "", `{"balance":1000000000000}`); status != 200 {
					t.Fatalf("PUT /accounts/%s: %d %s", a, status, body)
				}
			}
			n := failoverIntents(t)
			// The amount names the intent: intent i moves i+1.
			body := func(i int) string { return fmt.Sprintf(`{"from":"alice","to":"bob","amount":%d}`, i+1) }
			h := new(runHistory)
			trigger, wait := failover(t, c, int64(n/3))
			intents := runIntents(t, h, s.addr, "/transfers", "fo-", n, body, trigger)
			wait()

			byAmount := transfersByAmount(t, c.Standby.DSN("postgres"))
			var lost, reran, notAcked int
			for i, in := range intents {
				if !in.acked {
					notAcked++
					continue
				}
				ids := byAmount[int64(i+1)]
				kept := len(ids) == 1 && ids[0] == in.id
				if !kept {
					lost++
				}
				// The client's later retry of the acknowledged key.
				o := send(http.DefaultClient, h, 0, s.addr, "/transfers", in.key, body(i))
				switch {
				case o.Status != 201:
					t.Errorf("%s: the retry after the failover got %d", in.key, o.Status)
				case kept && (!o.Replayed || o.ID != in.id):
					t.Errorf("%s: acknowledged as transfer %d, kept, but the retry got %d (replayed %t)", in.key, in.id, o.ID, o.Replayed)
				case !kept:
					reran++
				}
			}
			if notAcked > 0 {
				t.Fatalf("%d of %d intents never acknowledged", notAcked, n)
			}
			byAmount = transfersByAmount(t, c.Standby.DSN("postgres"))
			var dup, missing int
			for i := range intents {
				switch k := len(byAmount[int64(i+1)]); {
				case k > 1:
					dup++
				case k == 0:
					missing++
				}
			}
			t.Logf("%s replication: %d intents, %d requests; after the failover: %d acknowledged intents vanished with their effect, %d ran again on the retry; in the end %d duplicated, %d missing",
				m.name, n, len(h.ops), lost, reran, dup, missing)
			if dup != 0 || missing != 0 {
				t.Fatalf("%d intents with two transfers or more, %d with none, want 0 and 0", dup, missing)
			}
			if lost != reran {
				t.Fatalf("%d acknowledged transfers vanished but %d ran again", lost, reran)
			}
			if m.sync && lost != 0 {
				t.Fatalf("synchronous replication lost %d acknowledged transfers, want 0", lost)
			}
			h.check(t, lost)
		})
	}
}

// transfersByAmount returns the ids of the transfers of the database at
// dsn, by amount.
func transfersByAmount(t *testing.T, dsn string) map[int64][]int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT amount, id FROM transfers`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]int64{}
	for rows.Next() {
		var amount, id int64
		if err := rows.Scan(&amount, &id); err != nil {
			t.Fatal(err)
		}
		out[amount] = append(out[amount], id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Leased payouts through the same failover: the payouts' records and
// ledger on the primary, the provider outside. Every intent ends with
// one charge at the provider, under the key derived from its own, one
// completed payout in the ledger carrying that charge, and one debit.
func TestFailoverE2EPayouts(t *testing.T) {
	servertest.Cluster(t)
	t.Parallel()
	for _, m := range failoverModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			c := pgcluster.Start(t, pgcluster.Options{Sync: m.sync})
			prov, purl := fakeprovider.Start(t, nil)
			s := startServe(t, "-db", c.URL("postgres"), "-request-timeout", "5s",
				"-provider", purl, "-lease", "2s", "-complete-interval", "500ms")
			const balance = 1_000_000
			if status, body := s.do(t, "PUT", "/accounts/alice", "", fmt.Sprintf(`{"balance":%d}`, balance)); status != 200 {
				t.Fatalf("PUT /accounts/alice: %d %s", status, body)
			}
			n := failoverIntents(t) / 3
			body := func(int) string { return `{"account":"alice","amount":1}` }
			h := new(runHistory)
			trigger, wait := failover(t, c, int64(n/3))
			intents := runIntents(t, h, s.addr, "/payouts", "fo-pay-", n, body, trigger)
			wait()
			var changed, lost int
			for _, in := range intents {
				if !in.acked {
					t.Fatalf("%s never acknowledged after %d attempts", in.key, in.attempts)
				}
				// The client's later retry of the acknowledged key.
				o := sendUntilSettled(h, s.addr, "/payouts", in.key, body(0))
				if o.Status != 201 {
					t.Errorf("%s: the retry after the failover got %d", in.key, o.Status)
				}
				if o.ID != in.id {
					changed++
				}
				if !in.replays(o) {
					lost++
				}
			}
			charged := map[string]bool{}
			for _, in := range intents {
				if k := prov.Effects(anonymousChargeKey(in.key)); k != 1 {
					t.Errorf("%s: %d charges at the provider under its derived key, want 1", in.key, k)
				}
			}
			for _, ch := range prov.Charges() {
				charged[ch.ID] = true
			}
			l := s.payoutList(t)
			var completed int
			seen := map[string]bool{}
			for _, p := range l {
				if p.State == "completed" && charged[p.ProviderChargeID] && !seen[p.ProviderChargeID] {
					completed++
				}
				seen[p.ProviderChargeID] = true
			}
			t.Logf("%s replication: %d payouts, %d requests; after the failover: %d acknowledged results lost (the retry ran again), %d answered with another payout id; provider: %d charges; ledger: %d payouts, %d completed with a distinct charge; balance %d",
				m.name, n, len(h.ops), lost, changed, len(prov.Charges()), len(l), completed, s.balance(t, "alice"))
			if len(prov.Charges()) != n || len(l) != n || completed != n {
				t.Fatalf("%d charges, %d payouts, %d completed with a distinct charge; want %d of each", len(prov.Charges()), len(l), completed, n)
			}
			if got := s.balance(t, "alice"); got != balance-int64(n) {
				t.Fatalf("alice's balance %d, want %d (one debit per payout)", got, balance-n)
			}
			if m.sync && (lost != 0 || changed != 0) {
				t.Fatalf("synchronous replication: %d acknowledged results lost, %d payouts changed id; want 0 and 0", lost, changed)
			}
			h.check(t, lost)
		})
	}
}

// Payouts whose leased records are on Redis behind three Sentinels (the
// ledger on a SQLite file), through go-redis's failover client: the
// master is killed with SIGKILL a third of the way through and the
// sentinels promote the replica. Replication is asynchronous, so the
// records the replica had not received are lost; the payouts' operation
// keys are derived from the intent's (docs/PAYOUTS.md), so a retry that
// finds no record finds the ledger's payout and the provider's charge
// instead of making new ones: one debit and one charge per intent.
func TestFailoverE2ERedisSentinel(t *testing.T) {
	servertest.Cluster(t)
	t.Parallel()
	ss := redistest.StartSentinels(t, redistest.ServerOptions{})
	prov, purl := fakeprovider.Start(t, nil)
	s := startServe(t, "-db", ss.URL(0)+"&prefix=fo", "-ledger", filepath.Join(t.TempDir(), "ledger.db"),
		"-request-timeout", "5s", "-provider", purl, "-lease", "2s", "-complete-interval", "500ms")
	const balance = 1_000_000
	if status, body := s.do(t, "PUT", "/accounts/alice", "", fmt.Sprintf(`{"balance":%d}`, balance)); status != 200 {
		t.Fatalf("PUT /accounts/alice: %d %s", status, body)
	}
	n := failoverIntents(t) / 3
	body := func(int) string { return `{"account":"alice","amount":1}` }
	h := new(runHistory)
	var once sync.Once
	trigger := func(acked int64) {
		if acked >= int64(n/3) {
			once.Do(ss.Master.Kill)
		}
	}
	intents := runIntents(t, h, s.addr, "/payouts", "fo-redis-", n, body, trigger)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ss.WaitFailover(ctx); err != nil {
		t.Fatal(err)
	}
	var changed, lost int
	for _, in := range intents {
		if !in.acked {
			t.Fatalf("%s never acknowledged after %d attempts", in.key, in.attempts)
		}
		o := sendUntilSettled(h, s.addr, "/payouts", in.key, body(0))
		if o.Status != 201 {
			t.Errorf("%s: the retry after the failover got %d", in.key, o.Status)
		}
		if o.ID != in.id {
			changed++
		}
		if !in.replays(o) {
			lost++
		}
		if k := prov.Effects(anonymousChargeKey(in.key)); k != 1 {
			t.Errorf("%s: %d charges at the provider under its derived key, want 1", in.key, k)
		}
	}
	l := s.payoutList(t)
	var completed int
	for _, p := range l {
		if p.State == "completed" {
			completed++
		}
	}
	t.Logf("Redis Sentinel: %d payouts, %d requests; after the failover: %d acknowledged results lost (the retry ran again), %d answered with another payout id; provider: %d charges; ledger: %d payouts, %d completed; balance %d",
		n, len(h.ops), lost, changed, len(prov.Charges()), len(l), completed, s.balance(t, "alice"))
	if len(prov.Charges()) != n || len(l) != n || completed != n || changed != 0 {
		t.Fatalf("%d charges, %d payouts (%d completed), %d changed ids; want %d, %d (%d), 0", len(prov.Charges()), len(l), completed, changed, n, n, n)
	}
	if got := s.balance(t, "alice"); got != balance-int64(n) {
		t.Fatalf("alice's balance %d, want %d (one debit per payout)", got, balance-n)
	}
	h.check(t, lost)
}

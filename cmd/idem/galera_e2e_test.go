package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/servertest"

	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/galeratest"
)

// TestGalera runs idem serve on a three-node MariaDB Galera cluster, one
// process per node (docs/MYSQL.md#galera). Its subtests share one cluster,
// whose start is most of the test's time, and run in order.
func TestGalera(t *testing.T) {
	servertest.Cluster(t)
	c := galeratest.Start(t, 3)
	// The first process migrates alone: GET_LOCK, the migration's lock, is
	// local to a node in Galera, so migrations started at once on two
	// nodes would not wait for each other.
	servers := []*server{startServe(t, "-db", c.Nodes[0].URL())}
	for _, n := range c.Nodes[1:] {
		servers = append(servers, startServe(t, "-db", n.URL()))
	}
	for _, id := range []string{"a", "b"} {
		if status, body := servers[0].do(t, "PUT", "/accounts/"+id, "", `{"balance":10000000}`); status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, status, body)
		}
	}
	t.Run("Storm", func(t *testing.T) { galeraStorm(t, servers) })
	t.Run("NodeKilled", func(t *testing.T) { galeraNodeKilled(t, c, servers) })
}

type galeraAnswer struct {
	server   int
	status   int
	replayed bool
	body     string
	err      error
}

func galeraPost(client *http.Client, s *server, key, body string) galeraAnswer {
	req, _ := http.NewRequest("POST", "http://"+s.addr+"/transfers", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return galeraAnswer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return galeraAnswer{status: res.StatusCode, replayed: res.Header.Get(idemhttp.ReplayedHeader) == "true", body: string(b), err: err}
}

// galeraStorm sends 100 concurrent requests per key, spread over the three
// nodes and released together, for 20 keys: one execution per key, every
// other answer a 409, that execution replayed, or a 503 with Retry-After
// for a transaction the cluster aborted (rolled back, nothing applied);
// never a 500. Two nodes may both run a key's transaction; certification
// lets one commit, and the other's answer must be a refusal, not an error.
func galeraStorm(t *testing.T, servers []*server) {
	const (
		keys   = 20
		perKey = 100
		amount = 2
	)
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: perKey}}
	defer client.CloseIdleConnections()
	before := servers[0].transferCount(t)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	executedOn := map[int]int{}
	conflicts, aborted := 0, 0
	for k := range keys {
		key := "galera-storm-" + run + "-" + strconv.Itoa(k)
		answers := make([]galeraAnswer, perKey)
		var ready, done sync.WaitGroup
		release := make(chan struct{})
		for i := range perKey {
			ready.Add(1)
			done.Go(func() {
				ready.Done()
				<-release
				a := galeraPost(client, servers[i%len(servers)], key, fmt.Sprintf(`{"from":"a","to":"b","amount":%d}`, amount))
				a.server = i % len(servers)
				answers[i] = a
			})
		}
		ready.Wait()
		close(release)
		done.Wait()
		var executed []galeraAnswer
		for _, a := range answers {
			if a.err != nil {
				t.Fatalf("key %d: %v", k, a.err)
			}
			if a.status == http.StatusCreated && !a.replayed {
				executed = append(executed, a)
			}
		}
		if len(executed) != 1 {
			t.Fatalf("key %d: %d executions over three nodes, want exactly 1", k, len(executed))
		}
		executedOn[executed[0].server]++
		for _, a := range answers {
			switch {
			case a.status == http.StatusCreated && !a.replayed:
			case a.status == http.StatusConflict:
				conflicts++
			case a.status == http.StatusServiceUnavailable && strings.Contains(a.body, "not applied"):
				// The effect's transaction was aborted by the cluster for
				// a transaction another node committed (a brute-force
				// abort): rolled back, unrecorded, to be retried.
				aborted++
			case a.status == http.StatusCreated && a.replayed && a.body == executed[0].body:
			default:
				t.Errorf("key %d, node %d: %d replayed=%v %s; want 409 or the execution's answer replayed", k, a.server, a.status, a.replayed, a.body)
			}
		}
		// Once the storm is over, a retry at any node is the replay.
		for i, s := range servers {
			a := retryUntilSettled(client, s, key, fmt.Sprintf(`{"from":"a","to":"b","amount":%d}`, amount))
			if a.status != http.StatusCreated || !a.replayed || a.body != executed[0].body {
				t.Errorf("key %d: retry at node %d: %d replayed=%v %s, want the replay", k, i, a.status, a.replayed, a.body)
			}
		}
	}
	if got := servers[2].transferCount(t) - before; got != keys {
		t.Errorf("transfers in the ledger: %d new, want one per key (%d)", got, keys)
	}
	t.Logf("executions per node: %v; 409 answers: %d; 503 (aborted by the cluster, rolled back): %d", executedOn, conflicts, aborted)
	if t.Failed() {
		for i, s := range servers {
			t.Logf("node %d's idem serve logged:\n%s", i, lastLines(s.stderr.String(), 20))
		}
	}
}

// retryUntilSettled posts until the answer is neither 409 nor 503: a node
// that has not yet applied the winning node's commit answers 409 for a
// moment.
func retryUntilSettled(client *http.Client, s *server, key, body string) galeraAnswer {
	var a galeraAnswer
	for range 100 {
		a = galeraPost(client, s, key, body)
		if a.err == nil && a.status != http.StatusConflict && a.status != http.StatusServiceUnavailable {
			return a
		}
		time.Sleep(50 * time.Millisecond)
	}
	return a
}

// galeraNodeKilled runs retrying clients, one key per intent and each
// intent a distinct amount, while node 1 is killed with SIGKILL and then
// rejoins: afterwards the ledger holds every intent's transfer exactly
// once (none lost, none twice), and the money moved is the sum of the
// intents.
func galeraNodeKilled(t *testing.T, c *galeratest.Cluster, servers []*server) {
	const (
		intents   = 150
		workers   = 12
		chaosBase = 1000 // intent i moves chaosBase+i: the amount names the intent
	)
	client := &http.Client{Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	start := servers[0].transferCount(t)
	next := make(chan int)
	type outcome struct {
		id       int64
		attempts int
		err      error
	}
	outcomes := make([]outcome, intents)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				key := "galera-chaos-" + run + "-" + strconv.Itoa(i)
				body := fmt.Sprintf(`{"from":"a","to":"b","amount":%d}`, chaosBase+i)
				o := &outcomes[i]
				deadline := time.Now().Add(3 * time.Minute)
				for o.attempts = 1; ; o.attempts++ {
					// Any node will do: a client retries at the next one
					// when its node does not answer.
					a := galeraPost(client, servers[(i+o.attempts)%len(servers)], key, body)
					if a.err == nil && a.status == http.StatusCreated {
						var tr struct{ ID int64 }
						if err := json.Unmarshal([]byte(a.body), &tr); err != nil {
							o.err = err
						}
						o.id = tr.ID
						break
					}
					if a.err == nil && a.status != http.StatusConflict && a.status < 500 {
						o.err = fmt.Errorf("intent %d: %d %s", i, a.status, a.body)
						break
					}
					var ne net.Error
					if a.err != nil && !errors.As(a.err, &ne) && !strings.Contains(a.err.Error(), "connection") && !strings.Contains(a.err.Error(), "EOF") {
						o.err = a.err
						break
					}
					if time.Now().After(deadline) {
						o.err = fmt.Errorf("intent %d: not settled after %d attempts: %v %d %s", i, o.attempts, a.err, a.status, a.body)
						break
					}
					time.Sleep(time.Duration(20+10*min(o.attempts, 20)) * time.Millisecond)
				}
			}
		})
	}
	for i := range intents {
		if i == intents/3 {
			c.Kill(1)
		}
		if i == 2*intents/3 {
			c.Restart(1, 3)
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if !c.Nodes[1].Running() {
		c.Restart(1, 3)
	}
	c.WaitSynced(3)
	for _, o := range outcomes {
		if o.err != nil {
			t.Error(o.err)
		}
	}
	// The ledger, read at a node that never went down.
	status, body := servers[2].do(t, "GET", "/transfers?limit=10000", "", "")
	var list struct {
		Count     int
		Transfers []struct {
			ID     int64
			Amount int64
		}
	}
	if status != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("GET /transfers: %d %s", status, body)
	}
	seen := map[int64]int{}
	ids := map[int64]int64{}
	for _, tr := range list.Transfers {
		if tr.ID <= 0 {
			continue
		}
		ids[tr.ID] = tr.Amount
	}
	for i, o := range outcomes {
		amount, ok := ids[o.id]
		if !ok || amount != int64(chaosBase+i) {
			t.Errorf("intent %d: answered transfer %d, which the ledger has as amount %d (present %v)", i, o.id, amount, ok)
		}
	}
	for _, tr := range list.Transfers {
		if tr.Amount >= chaosBase && tr.Amount < chaosBase+intents {
			seen[tr.Amount]++
		}
	}
	var twice []int64
	for a, n := range seen {
		if n > 1 {
			twice = append(twice, a)
		}
	}
	sort.Slice(twice, func(i, j int) bool { return twice[i] < twice[j] })
	if len(twice) > 0 {
		t.Errorf("intents executed twice (by amount): %v", twice)
	}
	if got := list.Count - start; got != intents {
		t.Errorf("ledger: %d new transfers, want %d (one per intent)", got, intents)
	}
	attempts := 0
	for _, o := range outcomes {
		attempts += o.attempts
	}
	t.Logf("%d intents, %d attempts in all, node 1 killed and rejoined", intents, attempts)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

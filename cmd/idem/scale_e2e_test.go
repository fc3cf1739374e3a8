package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/history"
	"github.com/idemkit/idem/internal/pgtest"
)

// Two idem serve processes on one PostgreSQL database take one duplicate
// storm per key, each storm's requests alternating between them and
// released together: every key has exactly one effect, every other answer
// is 409 or a replay of the one execution, and the ledger holds one
// transfer per key (docs/SCALING.md; docs/DESIGN.md#bars). Each process
// refuses its own duplicates in process and replays from its own cache;
// between them, only the database's lock and unique key decide.
func TestTwoServeProcessesOneStorm(t *testing.T) {
	t.Parallel()
	_, dsn := pgtest.Schema(t)
	servers := []*server{startServe(t, "-db", dsn), startServe(t, "-db", dsn)}
	servers[0].accounts(t)
	const (
		keys    = 8
		perKey  = 60
		amount  = 3
		timeout = 60 * time.Second
	)
	// Every attempt is recorded and checked as a history of keys at the
	// end (internal/history).
	hist := new(history.Recorder)
	defer history.Require(t, hist)
	client := &http.Client{Timeout: timeout, Transport: hist.Transport(0, &http.Transport{MaxIdleConnsPerHost: perKey})}
	defer client.CloseIdleConnections()
	type answer struct {
		server   int
		status   int
		replayed bool
		body     string
		err      error
	}
	post := func(s *server, key string) answer {
		req, _ := http.NewRequest("POST", "http://"+s.addr+"/transfers", strings.NewReader(fmt.Sprintf(`{"from":"a","to":"b","amount":%d}`, amount)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		res, err := client.Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return answer{status: res.StatusCode, replayed: res.Header.Get(idemhttp.ReplayedHeader) == "true", body: string(b), err: err}
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	executedBy := map[int]int{}
	for k := range keys {
		key := "storm-" + run + "-" + strconv.Itoa(k)
		answers := make([]answer, perKey)
		var ready, done sync.WaitGroup
		release := make(chan struct{})
		for i := range perKey {
			ready.Add(1)
			done.Go(func() {
				ready.Done()
				<-release
				a := post(servers[i%2], key)
				a.server = i % 2
				answers[i] = a
			})
		}
		ready.Wait()
		close(release)
		done.Wait()
		var executed []answer
		for _, a := range answers {
			if a.err != nil {
				t.Fatalf("key %d: %v", k, a.err)
			}
			if a.status == http.StatusCreated && !a.replayed {
				executed = append(executed, a)
			}
		}
		if len(executed) != 1 {
			t.Fatalf("key %d: %d executions over two processes, want exactly 1", k, len(executed))
		}
		executedBy[executed[0].server]++
		for _, a := range answers {
			switch {
			case a.status == http.StatusCreated && !a.replayed:
			case a.status == http.StatusConflict:
			case a.status == http.StatusCreated && a.replayed && a.body == executed[0].body:
			default:
				t.Errorf("key %d, server %d: %d replayed=%v %s; want 409 or the execution's answer replayed", k, a.server, a.status, a.replayed, a.body)
			}
		}
		// A retry at either process is the replay.
		for i, s := range servers {
			if a := post(s, key); a.status != http.StatusCreated || !a.replayed || a.body != executed[0].body {
				t.Errorf("key %d: retry at server %d: %d replayed=%v, want the replay", k, i, a.status, a.replayed)
			}
		}
	}
	if got := servers[1].transferCount(t); got != keys {
		t.Errorf("transfers in the ledger: %d, want one per key (%d)", got, keys)
	}
	status, body := servers[1].do(t, "GET", "/accounts/b", "", "")
	if want := fmt.Sprintf(`"balance":%d`, 1000+keys*amount); status != 200 || !strings.Contains(body, want) {
		t.Errorf("GET /accounts/b: %d %s, want %s", status, body, want)
	}
	t.Logf("executions per process: %v", executedBy)
	for _, s := range servers {
		s.stop(t)
	}
}

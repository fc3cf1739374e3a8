package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/amqptest"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/internal/pgtest"
)

// The outbox end to end: retrying HTTP clients -> idem serve -publish
// (SIGKILLed and restarted) -> the broker -> idem project (SIGKILLed and
// restarted too). Afterwards the projection applied exactly the ledger's
// transfers: none missing, none twice, none foreign. Each case names its
// broker objects after a fresh -events, deleted at its end.
func TestProjectionEndToEnd(t *testing.T) {
	t.Parallel()
	for _, broker := range []string{"nats", "amqp"} {
		for _, db := range []string{"sqlite", "postgres", "mysql"} {
			t.Run(broker+"/"+db, func(t *testing.T) {
				t.Parallel()
				runProjectionE2E(t, broker, db)
			})
		}
	}
}

// projectionIntents is how many transfers the clients make per case, and
// projectionImportRows how many more an idem import applies.
const projectionIntents, projectionImportRows = 150, 20

// importRows runs idem import of projectionImportRows transfers between
// the accounts a0… into db.
func importRows(t *testing.T, db, dir string, nAccounts int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,from,to,amount\n")
	for i := range projectionImportRows {
		fmt.Fprintf(&b, "row-%d,a%d,a%d,%d\n", i, i%nAccounts, (i+1)%nAccounts, 1+i%7)
	}
	file := filepath.Join(dir, "import.csv")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, code, stderr := runImport(t, "-db", db, file)
	if code != 0 || sum.Applied != projectionImportRows {
		t.Fatalf("idem import: exit %d, %d applied, want %d:\n%s", code, sum.Applied, projectionImportRows, stderr)
	}
	if !strings.Contains(stderr, "announced") {
		t.Errorf("idem import did not say it stages events:\n%s", stderr)
	}
}

func runProjectionE2E(t *testing.T, broker, db string) {
	var b [5]byte
	_, _ = crand.Read(b[:])
	events := "e2e_" + hex.EncodeToString(b[:])
	n := eventsNamed(events)
	var url string
	switch broker {
	case "nats":
		url = natstest.Require(t)
		_, js := natstest.Connect(t)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := js.DeleteStream(ctx, n.Stream); err != nil {
				t.Logf("delete stream %s: %v", n.Stream, err)
			}
		})
	default:
		url = amqptest.Require(t)
		t.Cleanup(func() {
			for _, name := range []string{n.Queue, n.Queue + amqpDeadSuffix, n.Exchange} {
				amqptest.Delete(t, url, name)
			}
		})
	}
	dir := t.TempDir()
	serveDB, projectDB := filepath.Join(dir, "idem.db"), filepath.Join(dir, "projection.db")
	switch db {
	case "postgres":
		_, serveDB = pgtest.Schema(t)
		_, projectDB = pgtest.Schema(t)
	case "mysql":
		_, dsn := mysqltest.Database(t)
		serveDB = mysqltest.URL(t, dsn)
		_, dsn = mysqltest.Database(t)
		projectDB = mysqltest.URL(t, dsn)
	}
	serveArgs := []string{"-db", serveDB, "-publish", url, "-events", events}
	projectArgs := []string{"-db", projectDB, "-consume", url, "-events", events}

	// The projection first: on RabbitMQ its queue must be bound before
	// events are published (mandatory publishing refuses an unroutable
	// one).
	var proj, srv atomic.Pointer[server]
	proj.Store(startIdem(t, "project", projectArgs...))
	srv.Store(startIdem(t, "serve", serveArgs...))
	// On the SQL servers, a second relay beside idem serve's.
	var relay *server
	if db != "sqlite" {
		relay = startIdem(t, "relay", "-db", serveDB, "-publish", url, "-events", events)
	}
	const nAccounts = 6
	for i := range nAccounts {
		if status, body := srv.Load().do(t, "PUT", fmt.Sprintf("/accounts/a%d", i), "", `{"balance":1000000}`); status != 200 {
			t.Fatalf("PUT /accounts/a%d: %d %s", i, status, body)
		}
	}

	// Four clients share the intents; each retries an intent with the
	// same key until it is answered 201, and sends about one in five a
	// second time after its 201 (a duplicate, answered by a replay).
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for c := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			client := &http.Client{Timeout: 15 * time.Second}
			for {
				i := next.Add(1)
				if i > projectionIntents {
					return
				}
				from := rng.IntN(nAccounts)
				to := (from + 1 + rng.IntN(nAccounts-1)) % nAccounts
				body := fmt.Sprintf(`{"from":"a%d","to":"a%d","amount":%d}`, from, to, 1+rng.IntN(9))
				sends := 1
				if rng.IntN(5) == 0 {
					sends = 2
				}
				for range sends {
					if err := postUntilCreated(client, &srv, fmt.Sprintf("intent-%d", i), body); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	// Meanwhile, kill each process twice, one after the other, and
	// restart it.
	for k := range 4 {
		time.Sleep(400 * time.Millisecond)
		target, args, cmd := &srv, serveArgs, "serve"
		if k%2 == 1 {
			target, args, cmd = &proj, projectArgs, "project"
		}
		e2eKill(t, target.Load())
		if k == 2 {
			// While idem serve is down (SQLite is one process per
			// file), an import: its rows are announced too.
			importRows(t, serveDB, dir, nAccounts)
		}
		target.Store(startIdem(t, cmd, args...))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// The ledger's transfers, then the projection catching up with them.
	var ledger struct {
		Count     int
		Transfers []struct{ ID int64 }
	}
	srv.Load().getJSON(t, "/transfers", &ledger)
	if ledger.Count != projectionIntents+projectionImportRows {
		t.Fatalf("the ledger holds %d transfers, want %d", ledger.Count, projectionIntents+projectionImportRows)
	}
	want := make([]int64, 0, ledger.Count)
	for _, tr := range ledger.Transfers {
		want = append(want, tr.ID)
	}
	slices.Sort(want)
	var applied struct {
		Count       int     `json:"count"`
		TransferIDs []int64 `json:"transfer_ids"`
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		proj.Load().getJSON(t, "/applied", &applied)
		if applied.Count >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A quiet second: a duplicate on its way would show.
	time.Sleep(time.Second)
	proj.Load().getJSON(t, "/applied", &applied)
	got := slices.Clone(applied.TransferIDs)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the projection applied %d events, the ledger holds %d transfers; %s", len(got), len(want), diffIDs(got, want))
	}
	// The totals agree with the ledger's balances.
	for i := range nAccounts {
		var acct struct{ Balance int64 }
		srv.Load().getJSON(t, fmt.Sprintf("/accounts/a%d", i), &acct)
		var p struct{ Debits, Credits int64 }
		proj.Load().getJSON(t, fmt.Sprintf("/accounts/a%d", i), &p)
		if got := 1000000 - p.Debits + p.Credits; got != acct.Balance {
			t.Errorf("account a%d: the projection says %d, the ledger %d", i, got, acct.Balance)
		}
	}
	// The metrics: nothing left pending, and the projection's inbox
	// counted what it applied.
	checkMetrics(t, srv.Load(), "idem_outbox_pending 0", "idem_outbox_parked 0", "idem_outbox_published_total ")
	checkMetrics(t, proj.Load(), `idem_inbox_messages_total{consumer="projection",outcome="applied"} `)
	stopped := []*server{srv.Load(), proj.Load()}
	if relay != nil {
		checkMetrics(t, relay, "idem_outbox_pending 0", "idem_outbox_published_total ")
		stopped = append(stopped, relay)
	}
	for _, s := range stopped {
		if code, _ := s.stop(t); code != 0 {
			t.Errorf("exit %d\n%s", code, s.stderr)
		}
	}
}

// postUntilCreated posts body under key to the current server until it
// answers 201 (a connection error or a 5xx, while the server is being
// killed and restarted, is retried), for at most a minute.
func postUntilCreated(client *http.Client, srv *atomic.Pointer[server], key, body string) error {
	var last string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		req, _ := http.NewRequest("POST", "http://"+srv.Load().addr+"/transfers", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		res, err := client.Do(req)
		if err != nil {
			last = err.Error()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case res.StatusCode == 201:
			return nil
		case res.StatusCode == 409 || res.StatusCode >= 500:
			// In flight elsewhere (the killed server's claim), or
			// unavailable: retry.
			last = fmt.Sprintf("%d %s", res.StatusCode, b)
			time.Sleep(50 * time.Millisecond)
		default:
			return fmt.Errorf("POST /transfers %s: %d %s", key, res.StatusCode, b)
		}
	}
	return fmt.Errorf("POST /transfers %s: no 201 within a minute; last: %s", key, last)
}

// diffIDs says which ids are missing, twice or foreign.
func diffIDs(got, want []int64) string {
	count := map[int64]int{}
	for _, id := range got {
		count[id]++
	}
	var missing, twice []int64
	for _, id := range want {
		switch count[id] {
		case 0:
			missing = append(missing, id)
		case 1:
		default:
			twice = append(twice, id)
		}
		delete(count, id)
	}
	var foreign []int64
	for id := range count {
		foreign = append(foreign, id)
	}
	return fmt.Sprintf("missing %v, more than once %v, foreign %v", missing, twice, foreign)
}

// checkMetrics GETs /metrics and fails unless it holds each of lines at
// the start of a line.
func checkMetrics(t *testing.T, s *server, lines ...string) {
	t.Helper()
	status, body := s.do(t, "GET", "/metrics", "", "")
	if status != 200 {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	for _, l := range lines {
		if !strings.HasPrefix(body, l) && !strings.Contains(body, "\n"+l) {
			t.Errorf("GET /metrics of idem %s has no line starting %q", s.cmd.Args[1], l)
		}
	}
}

// getJSON GETs path and decodes its 200 answer into v.
func (s *server) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	status, body := s.do(t, "GET", path, "", "")
	if status != 200 || json.Unmarshal([]byte(body), v) != nil {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
}

// startIdem starts "idem cmd -addr <free port> args..." and waits until
// its /healthz answers 200. The process is killed at clean-up if still
// running.
func startIdem(t *testing.T, cmd string, args ...string) *server {
	t.Helper()
	s := &server{addr: freePort(t), stderr: new(lockedBuffer), exited: make(chan error, 1)}
	s.cmd = exec.Command(binary, append([]string{cmd, "-addr", s.addr}, args...)...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() { _ = s.cmd.Process.Kill() })
	for range 1500 {
		res, err := http.Get("http://" + s.addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return s
			}
		}
		select {
		case err := <-s.exited:
			t.Fatalf("idem %s exited at start: %v\n%s", cmd, err, s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("idem %s on %s did not become healthy\n%s", cmd, s.addr, s.stderr)
	return nil
}

package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/internal/pgtest"
)

// BenchmarkPublishRatio measures what -publish costs a transfer over HTTP:
// two idem serve processes on one PostgreSQL (a schema each), one with
// -publish to the JetStream server on 127.0.0.1:4222 (its relay running
// beside it), one without, driven in interleaved rounds of 200 POST
// /transfers with new keys from 8 clients. It reports publish/plain, the
// throughput ratio (docs/BENCHMARKS.md, "Transfer events"). Run it with a
// small -benchtime, for example 30x.
//
// accounts=8 moves money between random pairs of 8 accounts, as idem
// bench's overhead measurement does; accounts=2 always from one account
// to the other, the worst case: every transfer waits for the row locks of
// the one before it, so whatever staging adds inside the transaction
// lengthens the critical section of all of them.
func BenchmarkPublishRatio(b *testing.B) {
	pgtest.Require(b)
	for _, accounts := range []int{8, 2} {
		b.Run(fmt.Sprint("accounts=", accounts), func(b *testing.B) { publishRatio(b, accounts) })
	}
}

func publishRatio(b *testing.B, accounts int) {
	const perRound, clients = 200, 8
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	start := func(name string, args ...string) string {
		_, dsn := pgtest.Schema(b)
		addr := freePortTB(b)
		cmd := exec.Command(binary, append([]string{"serve", "-addr", addr, "-db", dsn, "-log-level", "warn"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		base := "http://" + addr
		waitUp(b, client, base, &stderr)
		for i := range accounts {
			if status := post(b, client, "PUT", base+"/accounts/"+fmt.Sprint("a", i), "", `{"balance":1000000000000}`); status != 200 {
				b.Fatalf("%s: PUT /accounts/a%d: %d", name, i, status)
			}
		}
		return base
	}
	plain := start("plain")
	publish := start("publish", "-publish", "nats://127.0.0.1:4222", "-events", "bench_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	var seq atomic.Int64
	round := func(base string) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		run := seq.Add(1)
		t0 := time.Now()
		for range clients {
			wg.Go(func() {
				for i := next.Add(1); i <= perRound; i = next.Add(1) {
					key := fmt.Sprintf("pr-%d-%d", run, i)
					from := rand.IntN(accounts)
					to := (from + 1 + rand.IntN(accounts-1)) % accounts
					body := fmt.Sprintf(`{"from":"a%d","to":"a%d","amount":1}`, from, to)
					if status := post(b, client, "POST", base+"/transfers", key, body); status != 201 {
						b.Errorf("POST /transfers: %d", status)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	benchpair.Ratio(b, perRound, "transfers",
		benchpair.Variant{Name: "plain", Round: func() time.Duration { return round(plain) }},
		benchpair.Variant{Name: "publish", Round: func() time.Duration { return round(publish) }})
}

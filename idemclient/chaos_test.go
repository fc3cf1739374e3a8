package idemclient_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemclient"
)

// TestChaosExactlyOnce checks rules C1 and C2 end to end against the real
// idemhttp middleware: 200 intents go through a server that, at random
// (seeded), executes requests and drops or resets the answer, resets before
// executing, holds the answer past the client's attempt timeout, executes
// after the client gave up, or answers 409/503 with Retry-After. Every
// intent must end in 201 with its own answer, every intent's effect must be
// committed exactly once, and every attempt of an intent must carry the same
// key.
func TestChaosExactlyOnce(t *testing.T) {
	t.Parallel()
	const intents, workers, faultyAttempts = 200, 16, 4
	seed := uint64(20300102)
	if s := os.Getenv("IDEMCLIENT_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = v
	}
	t.Logf("seed %d (set IDEMCLIENT_CHAOS_SEED to change)", seed)

	var rngMu sync.Mutex
	rngs := make(map[string]*rand.Rand)
	pick := func(intent string, attempt int) fault {
		if attempt > faultyAttempts {
			return faultNone // so that every intent can finish
		}
		rngMu.Lock()
		defer rngMu.Unlock()
		r := rngs[intent]
		if r == nil {
			n, _ := strconv.ParseUint(strings.TrimPrefix(intent, "i-"), 10, 64)
			r = rand.New(rand.NewPCG(seed, n))
			rngs[intent] = r
		}
		if r.IntN(10) < 4 {
			return faultNone
		}
		return fault(1 + r.IntN(int(numFaults)-1))
	}
	store := newCountingStore()
	faults := newFaultServer(t, newIdemHandler(t, store), pick)
	srv := httptest.NewServer(faults)
	defer srv.Close()

	journal := openJournal(t)
	client, err := idemclient.New(&idemclient.Config{
		HTTPClient:     srv.Client(),
		AttemptTimeout: 250 * time.Millisecond,
		BaseDelay:      time.Millisecond,
		MaxDelay:       20 * time.Millisecond, // also caps the injected Retry-After: 1
		MaxAttempts:    40,
		MaxElapsed:     30 * time.Second,
		Journal:        journal,
		Rand:           rand.New(rand.NewPCG(seed, 0)),
		Logger:         discardLogger,
	})
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		in  *idemclient.Intent
		res *idemclient.Response
		err error
	}
	results := make([]result, intents)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= intents {
					return
				}
				in, err := client.NewIntent(http.MethodPost, srv.URL+"/transfers", fmt.Appendf(nil, `{"amount":%d}`, i+1))
				if err != nil {
					results[i].err = err
					continue
				}
				in.Header.Set("Content-Type", "application/json")
				in.Header.Set("X-Intent", fmt.Sprint("i-", i))
				res, err := client.Do(context.Background(), in)
				results[i] = result{in, res, err}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	srv.Close() // waits for handlers still running a "slow" fault

	applied := store.AppliedAll()
	attempts, replays := 0, 0
	for i, r := range results {
		id := fmt.Sprint("i-", i)
		if r.err != nil {
			t.Errorf("%s: got error %v, want 201", id, r.err)
			continue
		}
		if got, want := r.res.Status, http.StatusCreated; got != want {
			t.Errorf("%s: got status %d, want %d", id, got, want)
		}
		if got, want := string(r.res.Body), fmt.Sprintf(`{"intent":%q}`, id); got != want {
			t.Errorf("%s: got body %s, want %s", id, got, want)
		}
		if got, want := applied[id], 1; got != want {
			t.Errorf("%s: effect committed %d times, want %d", id, got, want)
		}
		if v, ok := store.Value("transfer:" + id); !ok || v != string(r.in.Body) {
			t.Errorf("%s: got transfer %q, %v; want %q", id, v, ok, r.in.Body)
		}
		keys := faults.Keys(id)
		if _, ok := keys[r.in.Key]; len(keys) != 1 || !ok {
			t.Errorf("%s: server saw keys %v, want only %q", id, keys, r.in.Key)
		}
		attempts += r.res.Attempts
		if r.res.Replayed {
			replays++
		}
	}
	if got, want := len(applied), intents; got != want {
		t.Errorf("intents applied: got %d, want %d", got, want)
	}
	if got := pendingKeys(t, journal); len(got) != 0 {
		t.Errorf("journal: got %d pending, want none", len(got))
	}
	counts := faults.Faults()
	for ft := fault(1); ft < numFaults; ft++ {
		if counts[ft] == 0 {
			t.Errorf("fault %s never injected; the test lost its teeth", faultNames[ft])
		}
	}
	if replays == 0 {
		t.Error("no answer was a replay; the test lost its teeth")
	}
	var b strings.Builder
	for ft, c := range counts {
		fmt.Fprintf(&b, " %s=%d", faultNames[ft], c)
	}
	t.Logf("%d intents, %d client attempts, %d server requests (faults:%s), %d replayed answers, %s",
		intents, attempts, sum(counts[:]), b.String(), replays, elapsed.Round(time.Millisecond))
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// rekeyTransport is the incident's bug: an interceptor that sees single
// attempts and gives each one a new key.
type rekeyTransport struct{ next http.RoundTripper }

func (t rekeyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	//idemvet:ignore the negative control reproduces the per-attempt key bug on purpose
	r.Header.Set("Idempotency-Key", idem.RandomKey())
	return t.next.RoundTrip(r)
}

// TestChaosCatchesPerAttemptKeys is the negative control of
// TestChaosExactlyOnce: with the incident's per-attempt keys, the same
// server and a dropped first answer apply every intent twice, and the
// harness sees it.
func TestChaosCatchesPerAttemptKeys(t *testing.T) {
	t.Parallel()
	const intents = 20
	store := newCountingStore()
	faults := newFaultServer(t, newIdemHandler(t, store), func(_ string, attempt int) fault {
		if attempt == 1 {
			return faultDropAfter
		}
		return faultNone
	})
	srv := httptest.NewServer(faults)
	defer srv.Close()
	// No kept-alive connections: net/http itself replays a request that
	// failed on a reused connection (below the interceptor, so with the
	// same key), which would hide the bug here.
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	hc := &http.Client{Transport: rekeyTransport{next: tr}}
	client, err := idemclient.New(&idemclient.Config{HTTPClient: hc, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range intents {
		in, err := client.NewIntent(http.MethodPost, srv.URL+"/transfers", []byte(`{"amount":1}`))
		if err != nil {
			t.Fatal(err)
		}
		in.Header.Set("X-Intent", fmt.Sprint("i-", i))
		if _, err := client.Do(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	for i := range intents {
		if got, want := store.Applied(fmt.Sprint("i-", i)), 2; got != want {
			t.Errorf("i-%d: effect committed %d times, want %d (the bug duplicates)", i, got, want)
		}
	}
}

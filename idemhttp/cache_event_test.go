package idemhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// Over real HTTP: a duplicate of a request being served is refused 409
// in process, and retries of the completed request are replayed from the
// Guard's memory; neither reaches the store, and the events, the log and
// the Guard's counters say so.
func TestInProcessAnswersOverHTTP(t *testing.T) {
	t.Parallel()
	var begins atomic.Int64
	e := setup(t)
	e.flaky.beforeBegin = func(context.Context) { begins.Add(1) }
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := &effectHandler{status: http.StatusCreated, body: `{"id":"t-1"}`, before: func(http.ResponseWriter, *http.Request) {
		once.Do(func() { close(started) })
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
	}}
	srv := httptest.NewServer(bearerAuth(e.mw.Handler(h)))
	defer srv.Close()
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	post := func(body string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/transfers", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Idempotency-Key", "k-1")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get(idemhttp.ReplayedHeader), string(b)
	}

	first := make(chan int, 1)
	go func() {
		status, _, _ := post(`{"amount":1}`)
		first <- status
	}()
	<-started
	const dups = 5
	for range dups {
		if status, _, _ := post(`{"amount":1}`); status != http.StatusConflict {
			t.Errorf("duplicate while running: status %d, want 409", status)
		}
	}
	close(release)
	if status := <-first; status != http.StatusCreated {
		t.Fatalf("first: status %d, want 201", status)
	}
	for range 3 {
		status, replayed, body := post(`{"amount":1}`)
		if status != http.StatusCreated || replayed != "true" || body != `{"id":"t-1"}` {
			t.Errorf("retry: %d replayed=%q %s, want the 201 replayed", status, replayed, body)
		}
	}
	if status, _, _ := post(`{"amount":2}`); status != http.StatusUnprocessableEntity {
		t.Errorf("other request with the key: status %d, want 422", status)
	}
	if n := begins.Load(); n != 1 {
		t.Errorf("store Begin calls = %d, want 1: only the first execution reaches the store", n)
	}
	if h.runs.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", h.runs.Load())
	}

	e.mu.Lock()
	var hits, misses, local int
	for _, ev := range e.events {
		switch {
		case ev.ReplayCache == idem.CacheHit && (ev.Outcome == idem.OutcomeReplayed || ev.Outcome == idem.OutcomeMismatch):
			hits++
		case ev.ReplayCache == idem.CacheMiss && ev.Outcome == idem.OutcomeInFlight && ev.LocalInFlight:
			local++
			misses++
		case ev.ReplayCache == idem.CacheMiss && ev.Outcome == idem.OutcomeExecuted && !ev.LocalInFlight:
			misses++
		default:
			t.Errorf("unexpected event %+v", ev)
		}
	}
	e.mu.Unlock()
	if hits != 4 || local != dups || misses != dups+1 {
		t.Errorf("events: %d cache hits, %d misses, %d local in-flight; want 4, %d, %d", hits, misses, local, dups+1, dups)
	}
	st := e.guard.Stats()
	if st.ReplayCacheHits != 4 || st.ReplayCacheMisses != dups+1 || st.LocalInFlight != dups {
		t.Errorf("Guard.Stats = %+v, want 4 hits, %d misses, %d local in-flight", st, dups+1, dups)
	}
	logs := e.logs.String()
	if got := strings.Count(logs, "replay_cache=hit"); got != 4 {
		t.Errorf("log lines with replay_cache=hit: %d, want 4:\n%s", got, logs)
	}
	if got := strings.Count(logs, "in_flight_local=true"); got != dups {
		t.Errorf("log lines with in_flight_local=true: %d, want %d:\n%s", got, dups, logs)
	}
}

package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/internal/testclock"
	"github.com/idemkit/idem/memstore"
)

// payoutHandler is a leased handler in the shape the issue describes: a
// local step (a debit through the store's transaction), a foreign step (a
// "charge", counted), then its answer. It counts each step function's runs,
// so that a test can tell whether a step ran again.
type payoutHandler struct {
	runs, debits, charges atomic.Int64
	// fail5xx is how many of the next runs answer 503 (with Retry-After:
	// 7) after the debit, before the charge.
	fail5xx atomic.Int64
	// entered receives the run number once the steps are done; stall, if
	// set, is waited for by the first run after its steps.
	entered chan int64
	stall   chan struct{}
	// waitLease makes the first run wait for its context to end after
	// the debit (the lease lost), then answer 201 without its charge.
	waitLease bool
	// chargeKeys are the derived keys the charge step was called with.
	mu         sync.Mutex
	chargeKeys []string
}

func (h *payoutHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run, ok := idem.RunFrom(ctx)
	if !ok {
		http.Error(w, "no run", http.StatusInternalServerError)
		return
	}
	n := h.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	account := r.PathValue("account")
	debit, err := run.LocalStep(ctx, "debit", func(ctx context.Context) ([]byte, error) {
		tx, ok := memstore.TxFrom(ctx)
		if !ok {
			return nil, errors.New("no transaction in a local step")
		}
		h.debits.Add(1)
		tx.Set("debit/"+run.DerivedKey("debit"), account+" "+string(body))
		return []byte("debited " + account), nil
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if n == 1 && h.waitLease {
		h.entered <- n
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Second):
		}
		w.WriteHeader(http.StatusCreated)
		return
	}
	if h.fail5xx.Load() > 0 {
		h.fail5xx.Add(-1)
		w.Header().Set("Retry-After", "7")
		http.Error(w, "provider down", http.StatusServiceUnavailable)
		return
	}
	charge, err := run.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
		h.charges.Add(1)
		key := run.DerivedKey("charge")
		h.mu.Lock()
		h.chargeKeys = append(h.chargeKeys, key)
		h.mu.Unlock()
		return []byte("ch_" + key[5:13]), nil
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if n == 1 && h.stall != nil {
		h.entered <- n
		select {
		case <-h.stall:
		case <-time.After(20 * time.Second):
		}
	}
	principal, _ := idem.PrincipalFrom(ctx)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payouts/"+account+"/1")
	w.Header().Set("X-Not-Recorded", "first only")
	w.WriteHeader(http.StatusCreated)
	out, _ := json.Marshal(map[string]any{
		"account": account, "debit": string(debit), "charge": string(charge), "attempt": run.Attempt,
		"principal": principal, "tag": r.Header.Get("X-Request-Tag"), "content_type": r.Header.Get("Content-Type"),
		"body": string(body), "pattern": r.Pattern, "query": r.URL.Query().Get("note"),
	})
	w.Write(out)
}

// leasedEnv is a server with one leased route, POST /payouts/{account},
// over a memstore, with a settable clock.
type leasedEnv struct {
	store  *memstore.Store
	clock  *testclock.Clock
	leased *idem.Leased
	mw     *idemhttp.Middleware
	srv    *httptest.Server
	client *http.Client
	logs   *syncBuffer

	mu     sync.Mutex
	events []idem.Event
}

type leasedSetup struct {
	store  *memstore.Store
	clock  *testclock.Clock
	leased idem.LeasedConfig
	cfg    idemhttp.Config
}

// setupLeased serves h on a leased route of kind "payout". The lease is an
// hour and the heartbeat 50 minutes unless s.leased says otherwise, so
// that no heartbeat moves a lease during a test that sets the clock.
func setupLeased(t *testing.T, h http.Handler, s leasedSetup) *leasedEnv {
	t.Helper()
	e := &leasedEnv{store: s.store, clock: s.clock, logs: &syncBuffer{}}
	if e.store == nil {
		e.store = memstore.New()
	}
	if e.clock == nil {
		e.clock = testclock.New()
	}
	lc := s.leased
	if lc.Lease == 0 {
		lc.Lease, lc.Heartbeat = time.Hour, 50*time.Minute
	}
	if lc.Now == nil {
		lc.Now = e.clock.Now
	}
	var err error
	e.leased, err = idem.NewLeased(e.store, &lc)
	if err != nil {
		t.Fatal(err)
	}
	guard, err := idem.New(e.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.cfg
	cfg.Leased = e.leased
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Observer = idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.events = append(e.events, ev)
	})
	e.mw, err = idemhttp.New(guard, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payouts/{account}", e.mw.Route(idemhttp.RouteOptions{Leased: true, Kind: "payout"})(h))
	e.srv = httptest.NewServer(bearerAuth(mux))
	t.Cleanup(e.srv.Close)
	e.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

// checkOutcomes asserts the outcomes seen, in any order: a request's
// outcome is told after its answer is sent, so the next request's may come
// first.
func (e *leasedEnv) checkOutcomes(t *testing.T, want ...idem.Outcome) {
	t.Helper()
	e.mu.Lock()
	var got []idem.Outcome
	for _, ev := range e.events {
		got = append(got, ev.Outcome)
	}
	e.mu.Unlock()
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

// post sends POST target as alice with key and body; extra are header
// name/value pairs.
func (e *leasedEnv) post(t *testing.T, target, key, body string, extra ...string) response {
	t.Helper()
	req, err := http.NewRequest("POST", e.srv.URL+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alice")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Add(extra[i], extra[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", target, err)
		return response{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("POST %s: reading the body: %v", target, err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

func (e *leasedEnv) record(t *testing.T, key string) *idem.Record {
	t.Helper()
	rec, err := e.store.Lookup(t.Context(), &idem.LookupParams{Scope: alice, Key: key})
	if err != nil {
		t.Fatalf("record %q: %v", key, err)
	}
	return rec
}

// checkLeasedProblem asserts a problem+json answer.
func checkLeasedProblem(t *testing.T, r response, typ string, status int) {
	t.Helper()
	if r.status != status || r.header.Get("Content-Type") != idemhttp.ProblemContentType {
		t.Fatalf("got %d %q %s, want %d problem+json", r.status, r.header.Get("Content-Type"), r.body, status)
	}
	var p idemhttp.Problem
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" {
		t.Fatalf("problem: got %+v, want type %s status %d and a title", p, typ, status)
	}
}

func decodeBody(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return m
}

func TestLeasedReplayByteForByte(t *testing.T) {
	t.Parallel()
	h := &payoutHandler{}
	e := setupLeased(t, h, leasedSetup{})
	first := e.post(t, "/payouts/acc-1?note=n1", "k1", `{"amount": 10}`)
	if first.status != http.StatusCreated {
		t.Fatalf("first: got %d %s, want 201", first.status, first.body)
	}
	if first.header.Get("X-Not-Recorded") == "" {
		t.Errorf("the first answer lacks a header the handler set")
	}
	got := decodeBody(t, first.body)
	if got["principal"] != alice || got["account"] != "acc-1" || got["attempt"] != float64(1) {
		t.Errorf("first body: %v", got)
	}
	for range 2 {
		again := e.post(t, "/payouts/acc-1?note=n1", "k1", `{"amount":10}`) // same JSON, other spacing
		if again.status != first.status || again.body != first.body {
			t.Errorf("replay: got %d %q, want %d %q", again.status, again.body, first.status, first.body)
		}
		for _, name := range []string{"Content-Type", "Location", "Content-Length"} {
			if again.header.Get(name) != first.header.Get(name) {
				t.Errorf("replay %s: got %q, want %q", name, again.header.Get(name), first.header.Get(name))
			}
		}
		if again.header.Get(idemhttp.ReplayedHeader) != "true" {
			t.Errorf("replay without %s: true", idemhttp.ReplayedHeader)
		}
		if again.header.Get("X-Not-Recorded") != "" {
			t.Errorf("replay carries a header that is not recorded")
		}
	}
	if h.runs.Load() != 1 || h.debits.Load() != 1 || h.charges.Load() != 1 {
		t.Errorf("runs, debits, charges: got %d, %d, %d, want 1 each", h.runs.Load(), h.debits.Load(), h.charges.Load())
	}
	rec := e.record(t, "k1")
	if rec.State != idem.StateCompleted || rec.Kind != "http:payout" || rec.Token == 0 {
		t.Errorf("record: state %s kind %q token %d, want completed, http:payout, a token", rec.State, rec.Kind, rec.Token)
	}
	e.checkOutcomes(t, idem.OutcomeExecuted, idem.OutcomeReplayed, idem.OutcomeReplayed)
}

func TestLeasedInFlightAndMismatch(t *testing.T) {
	t.Parallel()
	h := &payoutHandler{entered: make(chan int64, 1), stall: make(chan struct{})}
	e := setupLeased(t, h, leasedSetup{})
	done := make(chan response, 1)
	go func() { done <- e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`) }()
	select {
	case <-h.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the first request did not reach the handler")
	}
	// The lease is an hour; the clock has not moved.
	r := e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`)
	checkLeasedProblem(t, r, idemhttp.ProblemInFlight, http.StatusConflict)
	if got := r.header.Get("Retry-After"); got != "3600" {
		t.Errorf("Retry-After: got %q, want 3600 (the lease left)", got)
	}
	e.clock.Advance(20 * time.Minute)
	r = e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`)
	checkLeasedProblem(t, r, idemhttp.ProblemInFlight, http.StatusConflict)
	if got := r.header.Get("Retry-After"); got != "2400" {
		t.Errorf("Retry-After 20 minutes later: got %q, want 2400", got)
	}
	// Another request with the key, while it is held: 422, not 409.
	checkLeasedProblem(t, e.post(t, "/payouts/acc-1", "k1", `{"amount":11}`), idemhttp.ProblemMismatch, http.StatusUnprocessableEntity)

	close(h.stall)
	if first := <-done; first.status != http.StatusCreated {
		t.Fatalf("first: got %d %s, want 201", first.status, first.body)
	}
	// Once completed: another body, path or query is still 422.
	for _, target := range []string{"/payouts/acc-2", "/payouts/acc-1?note=x"} {
		checkLeasedProblem(t, e.post(t, target, "k1", `{"amount":10}`), idemhttp.ProblemMismatch, http.StatusUnprocessableEntity)
	}
	checkLeasedProblem(t, e.post(t, "/payouts/acc-1", "k1", `{"amount":11}`), idemhttp.ProblemMismatch, http.StatusUnprocessableEntity)
	if h.runs.Load() != 1 {
		t.Errorf("handler runs: got %d, want 1", h.runs.Load())
	}
	e.checkOutcomes(t, idem.OutcomeInFlight, idem.OutcomeInFlight, idem.OutcomeMismatch,
		idem.OutcomeExecuted, idem.OutcomeMismatch, idem.OutcomeMismatch, idem.OutcomeMismatch)
}

func TestLeased5xxReleasesAndRetryResumes(t *testing.T) {
	t.Parallel()
	h := &payoutHandler{}
	h.fail5xx.Store(1)
	e := setupLeased(t, h, leasedSetup{})
	r := e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "7" || !strings.Contains(r.body, "provider down") {
		t.Fatalf("first: got %d Retry-After %q %q, want the handler's 503 with Retry-After 7", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r.header.Get(idemhttp.ReplayedHeader) != "" {
		t.Errorf("a 5xx sent as a replay")
	}
	rec := e.record(t, "k1")
	if rec.State != idem.StatePending || !strings.Contains(rec.LastError, "503") || rec.LeaseUntil.After(e.clock.Now()) {
		t.Errorf("after the 5xx: state %s, last error %q, lease until %s (now %s); want pending, released now with the error",
			rec.State, rec.LastError, rec.LeaseUntil, e.clock.Now())
	}
	r = e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`)
	if r.status != http.StatusCreated {
		t.Fatalf("retry: got %d %s, want 201", r.status, r.body)
	}
	got := decodeBody(t, r.body)
	if got["attempt"] != float64(2) || got["debit"] != "debited acc-1" {
		t.Errorf("retry body: %v, want attempt 2 and the recorded debit", got)
	}
	if h.runs.Load() != 2 || h.debits.Load() != 1 || h.charges.Load() != 1 {
		t.Errorf("runs, debits, charges: got %d, %d, %d, want 2, 1, 1 (the debit not run again)", h.runs.Load(), h.debits.Load(), h.charges.Load())
	}
	if v, ok := e.store.Value("debit/" + idem.DerivedKey(alice, "k1", "debit")); !ok || v != `acc-1 {"amount":10}` {
		t.Errorf("debit effect: got %q %v", v, ok)
	}
	e.checkOutcomes(t, idem.OutcomeReleased, idem.OutcomeExecuted)
}

// A first request stalls after its steps (its process frozen, its
// heartbeats stopped) until its lease has run out; the completer of
// another process finishes it from its recovery points; the client's retry
// gets the completer's answer as a replay, and the stalled holder, waking
// up, is refused.
func TestLeasedCompleterFinishesAbandonedRequest(t *testing.T) {
	t.Parallel()
	store, clock := memstore.New(), testclock.New()
	h := &payoutHandler{entered: make(chan int64, 1), stall: make(chan struct{})}
	fcfg := idemhttp.Config{FingerprintHeaders: []string{"X-Request-Tag"}}
	a := setupLeased(t, h, leasedSetup{store: store, clock: clock, cfg: fcfg})
	b := setupLeased(t, h, leasedSetup{store: store, clock: clock, cfg: fcfg})

	stalled := make(chan response, 1)
	go func() {
		stalled <- a.post(t, "/payouts/acc-1?note=n1", "k1", `{"amount":10}`, "X-Request-Tag", "t1")
	}()
	select {
	case <-h.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the first request did not reach the handler")
	}
	completer, err := idem.NewCompleter(b.leased, &idem.CompleterConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := completer.RunOnce(t.Context()); err != nil || rep.Found != 0 {
		t.Fatalf("completer under a live lease: %+v, %v; want nothing found", rep, err)
	}
	clock.Advance(time.Hour + time.Second)
	rep, err := completer.RunOnce(t.Context())
	if err != nil || rep.Found != 1 || rep.Completed != 1 {
		t.Fatalf("completer: %+v, %v; want one found and completed", rep, err)
	}
	if h.runs.Load() != 2 || h.debits.Load() != 1 || h.charges.Load() != 1 {
		t.Errorf("runs, debits, charges: got %d, %d, %d, want 2, 1, 1 (resumed after the last step)", h.runs.Load(), h.debits.Load(), h.charges.Load())
	}
	rec := a.record(t, "k1")
	if rec.State != idem.StateCompleted || rec.Result.Status != http.StatusCreated || rec.Attempts != 2 {
		t.Fatalf("record after the completer: %s %d, %d attempts; want completed 201 after 2", rec.State, rec.Result.Status, rec.Attempts)
	}
	done := decodeBody(t, string(rec.Result.Body))
	want := map[string]any{
		"account": "acc-1", "principal": alice, "tag": "t1", "content_type": "application/json",
		"body": `{"amount":10}`, "pattern": "POST /payouts/{account}", "query": "n1", "attempt": float64(2),
	}
	for k, v := range want {
		if done[k] != v {
			t.Errorf("the completer's request: %s = %v, want %v", k, done[k], v)
		}
	}

	// The client's retry, to either server, gets the completer's answer.
	for _, e := range []*leasedEnv{a, b} {
		r := e.post(t, "/payouts/acc-1?note=n1", "k1", `{"amount":10}`, "X-Request-Tag", "t1")
		if r.status != http.StatusCreated || r.body != string(rec.Result.Body) || r.header.Get(idemhttp.ReplayedHeader) != "true" ||
			r.header.Get("Location") != "/payouts/acc-1/1" {
			t.Errorf("retry: got %d %q %v, want the completer's 201 replayed", r.status, r.body, r.header)
		}
	}

	// The stalled holder wakes up: its completion is fenced.
	close(h.stall)
	r := <-stalled
	checkLeasedProblem(t, r, idemhttp.ProblemLeaseLost, http.StatusServiceUnavailable)
	if got := a.record(t, "k1"); string(got.Result.Body) != string(rec.Result.Body) || got.Token != rec.Token {
		t.Errorf("the stalled holder changed the record")
	}
	if h.runs.Load() != 2 {
		t.Errorf("handler runs: got %d, want 2", h.runs.Load())
	}
}

// The completer treats the re-served request's 5xx as a request would: an
// attempt that failed, retried after a backoff from its recovery points.
func TestLeasedCompleterRetries5xx(t *testing.T) {
	t.Parallel()
	h := &payoutHandler{}
	h.fail5xx.Store(2) // the request, then the completer's first attempt
	e := setupLeased(t, h, leasedSetup{})
	if r := e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`); r.status != http.StatusServiceUnavailable {
		t.Fatalf("first: got %d, want 503", r.status)
	}
	completer, err := idem.NewCompleter(e.leased, &idem.CompleterConfig{Logger: slog.New(slog.DiscardHandler), MinBackoff: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := completer.RunOnce(t.Context())
	if err != nil || rep.Found != 1 || rep.Failed != 1 {
		t.Fatalf("first pass: %+v, %v; want one failed", rep, err)
	}
	if rec := e.record(t, "k1"); rec.State != idem.StatePending || !strings.Contains(rec.LastError, "503") {
		t.Errorf("after a failed pass: %s, %q", rec.State, rec.LastError)
	}
	if rep, err := completer.RunOnce(t.Context()); err != nil || rep.Found != 0 {
		t.Fatalf("pass within the backoff: %+v, %v; want nothing found", rep, err)
	}
	e.clock.Advance(3 * time.Minute)
	if rep, err := completer.RunOnce(t.Context()); err != nil || rep.Completed != 1 {
		t.Fatalf("pass after the backoff: %+v, %v; want one completed", rep, err)
	}
	if h.runs.Load() != 3 || h.debits.Load() != 1 || h.charges.Load() != 1 {
		t.Errorf("runs, debits, charges: got %d, %d, %d, want 3, 1, 1", h.runs.Load(), h.debits.Load(), h.charges.Load())
	}
	r := e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`)
	if r.status != http.StatusCreated || r.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("retry: got %d %v, want the 201 replayed", r.status, r.header)
	}
}

func TestLeasedStoredRequestHasNoCredentials(t *testing.T) {
	t.Parallel()
	h := &payoutHandler{}
	// Even fingerprinted, credentials are not stored.
	e := setupLeased(t, h, leasedSetup{cfg: idemhttp.Config{
		FingerprintHeaders: []string{"X-Request-Tag", "Authorization", "Cookie", "Proxy-Authorization", "Idempotency-Key"},
	}})
	const key = "key-8c1f0e5d"
	r := e.post(t, "/payouts/acc-1?note=n1", key, `{"amount":10}`,
		"X-Request-Tag", "t1", "Cookie", "session=s3cr3t-cookie", "Proxy-Authorization", "Basic cHJveHk6c2VjcmV0", "X-Other", "not stored")
	if r.status != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", r.status, r.body)
	}
	rec := e.record(t, key)
	for _, secret := range []string{"Bearer", "s3cr3t-cookie", "cHJveHk6c2VjcmV0", key, "Authorization", "Cookie", "not stored"} {
		if strings.Contains(string(rec.Input), secret) {
			t.Errorf("the stored request holds %q: %s", secret, rec.Input)
		}
	}
	var in struct {
		Method, Target, Host, Pattern, Principal string
		Header                                   map[string][]string
		Body                                     []byte
		Anonymous                                bool
	}
	if err := json.Unmarshal(rec.Input, &in); err != nil {
		t.Fatal(err)
	}
	if in.Method != "POST" || in.Target != "/payouts/acc-1?note=n1" || in.Pattern != "POST /payouts/{account}" ||
		in.Principal != alice || in.Anonymous || string(in.Body) != `{"amount":10}` {
		t.Errorf("stored request: %+v", in)
	}
	wantHeader := map[string][]string{"Content-Type": {"application/json"}, "X-Request-Tag": {"t1"}}
	if len(in.Header) != len(wantHeader) || !slices.Equal(in.Header["Content-Type"], wantHeader["Content-Type"]) ||
		!slices.Equal(in.Header["X-Request-Tag"], wantHeader["X-Request-Tag"]) {
		t.Errorf("stored headers: got %v, want %v", in.Header, wantHeader)
	}
}

// A holder whose lease is taken over while its handler runs learns it from
// its next heartbeat: its context ends, and whatever it answers, the
// client gets 503 lease-lost and nothing it wrote after is kept.
func TestLeasedLeaseLost(t *testing.T) {
	t.Parallel()
	h := &payoutHandler{entered: make(chan int64, 1), waitLease: true}
	e := setupLeased(t, h, leasedSetup{leased: idem.LeasedConfig{Lease: 2 * time.Second, Heartbeat: 20 * time.Millisecond, Now: time.Now}})
	done := make(chan response, 1)
	go func() { done <- e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`) }()
	select {
	case <-h.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the first request did not reach the handler")
	}
	// Another holder takes the record over, as a completer would once the
	// lease had ended (its clock an hour ahead, whatever the heartbeats).
	rec := e.record(t, "k1")
	claim, err := e.store.Claim(t.Context(), &idem.ClaimParams{
		Scope: rec.Scope, Key: rec.Key, Fingerprint: rec.Fingerprint, Kind: rec.Kind, Input: rec.Input,
		Now: time.Now().Add(time.Hour), Lease: time.Hour,
	})
	if err != nil || !claim.Claimed || len(claim.Steps) != 1 || claim.Steps[0].Name != "debit" {
		t.Fatalf("takeover: %+v, %v; want claimed with the debit step", claim, err)
	}
	var r response
	select {
	case r = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("the holder did not stop after losing its lease")
	}
	checkLeasedProblem(t, r, idemhttp.ProblemLeaseLost, http.StatusServiceUnavailable)
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After: got %q, want 2 (the lease)", got)
	}

	if got := e.record(t, "k1"); got.State != idem.StatePending || got.Token != claim.Lease.Token {
		t.Errorf("record: %s token %d, want pending under the new token %d", got.State, got.Token, claim.Lease.Token)
	}
	if !strings.Contains(e.logs.String(), "level=ERROR msg=\"idemhttp: lease_lost\"") {
		t.Errorf("no ERROR line for lease_lost in:\n%s", e.logs)
	}
	e.checkOutcomes(t, idem.OutcomeLeaseLost)
	// The new holder completes; the client's retry gets its answer.
	err = e.store.Complete(t.Context(), &idem.CompleteParams{
		Lease: claim.Lease, Result: idem.Result{Status: 201, Body: []byte(`{"by":"successor"}`)},
		Now: time.Now(), ExpiresAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	r = e.post(t, "/payouts/acc-1", "k1", `{"amount":10}`)
	if r.status != 201 || r.body != `{"by":"successor"}` || r.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("retry: got %d %q, want the successor's answer replayed", r.status, r.body)
	}
}

// Fifty clients send one key at once to a leased route: one runs the
// handler, which holds on until the others have been answered, each with
// 409 or (once it is done) the replay.
func TestLeasedStorm(t *testing.T) {
	t.Parallel()
	const clients = 50
	release := make(chan struct{})
	var runs atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		run, ok := idem.RunFrom(r.Context())
		if !ok {
			t.Errorf("no run")
			return
		}
		if _, err := run.LocalStep(r.Context(), "debit", func(ctx context.Context) ([]byte, error) {
			tx, _ := memstore.TxFrom(ctx)
			tx.Set("storm/debit", "10")
			return nil, nil
		}); err != nil {
			t.Errorf("debit: %v", err)
		}
		select {
		case <-release:
		case <-time.After(20 * time.Second):
			t.Errorf("the other clients were not all answered while the first one ran")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"payout":"p-1"}`)
	})
	e := setupLeased(t, handler, leasedSetup{leased: idem.LeasedConfig{Lease: 30 * time.Second, Now: time.Now}})
	var (
		wg       sync.WaitGroup
		answered atomic.Int64
		once     sync.Once
		mu       sync.Mutex
		statuses = map[int]int{}
		bodies   = map[string]int{}
	)
	start := make(chan struct{})
	for range clients {
		wg.Go(func() {
			<-start
			r := e.post(t, "/payouts/acc-1", "storm", `{"amount":10}`)
			if r.status == http.StatusConflict && r.header.Get("Retry-After") == "" {
				t.Errorf("409 without Retry-After")
			}
			mu.Lock()
			statuses[r.status]++
			if r.status == http.StatusCreated {
				bodies[r.body]++
			}
			mu.Unlock()
			if answered.Add(1) == clients-1 {
				once.Do(func() { close(release) })
			}
		})
	}
	close(start)
	wg.Wait()
	once.Do(func() { close(release) })
	if runs.Load() != 1 {
		t.Errorf("handler runs: got %d, want 1", runs.Load())
	}
	if statuses[http.StatusCreated] < 1 || statuses[http.StatusCreated]+statuses[http.StatusConflict] != clients || len(bodies) != 1 {
		t.Errorf("answers: %v, bodies %v; want one 201 body, the rest 409 or its replay", statuses, bodies)
	}
	r := e.post(t, "/payouts/acc-1", "storm", `{"amount":10}`)
	if r.status != http.StatusCreated || r.body != `{"payout":"p-1"}` || r.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("retry: got %d %q, want the replay", r.status, r.body)
	}
}

func TestLeasedRouteProgrammingErrors(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	guard, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	leased, err := idem.NewLeased(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := idemhttp.New(guard, nil)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(guard, &idemhttp.Config{Leased: leased})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mustPanic := func(name, want string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			p := recover()
			if p == nil {
				t.Errorf("%s: no panic", name)
				return
			}
			if s := fmt.Sprint(p); !strings.Contains(s, want) {
				t.Errorf("%s: panic %q, want it to mention %q", name, s, want)
			}
		}()
		f()
	}
	mustPanic("no Config.Leased", "Config.Leased", func() { plain.Route(idemhttp.RouteOptions{Leased: true, Kind: "a"}) })
	mustPanic("no Kind", "Kind", func() { mw.Route(idemhttp.RouteOptions{Leased: true}) })
	mustPanic("Kind alone", "Leased", func() { mw.Route(idemhttp.RouteOptions{Kind: "a"}) })
	mustPanic("invalid Kind", "Kind", func() { mw.Route(idemhttp.RouteOptions{Leased: true, Kind: "a\nb"}) })
	mustPanic("long Kind", "Kind", func() { mw.Route(idemhttp.RouteOptions{Leased: true, Kind: strings.Repeat("k", 251)}) })
	mustPanic("FailOpen", "FailOpen", func() { mw.Route(idemhttp.RouteOptions{Leased: true, Kind: "a", FailOpen: true}) })
	route := mw.Route(idemhttp.RouteOptions{Leased: true, Kind: "payout"})
	route(ok)
	mustPanic("Kind twice", `"payout"`, func() { route(ok) })
	mustPanic("Kind twice, another Route", "one handler only", func() { mw.Route(idemhttp.RouteOptions{Leased: true, Kind: "payout"})(ok) })
	// A kind of 250 bytes is "http:" and 250 bytes: the longest allowed.
	mw.Route(idemhttp.RouteOptions{Leased: true, Kind: strings.Repeat("k", 250)})(ok)
}

// A leased handler that panics releases its claim with its steps kept, and
// the panic goes on up the stack; the retry resumes after the last step.
func TestLeasedPanicReleases(t *testing.T) {
	t.Parallel()
	var runs, debits atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		run, _ := idem.RunFrom(r.Context())
		if _, err := run.LocalStep(r.Context(), "debit", func(context.Context) ([]byte, error) {
			debits.Add(1)
			return nil, nil
		}); err != nil {
			t.Errorf("debit: %v", err)
		}
		if runs.Add(1) == 1 {
			panic("boom")
		}
		w.WriteHeader(http.StatusCreated)
	})
	e := setupLeased(t, h, leasedSetup{})
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		e.srv.Config.Handler.ServeHTTP(httptest.NewRecorder(), authedPost("/payouts/acc-1", "k1"))
	}()
	rec := e.record(t, "k1")
	if rec.State != idem.StatePending || !strings.Contains(rec.LastError, "boom") || rec.LeaseUntil.After(e.clock.Now()) {
		t.Errorf("after the panic: %s, %q, lease until %s; want pending, released now", rec.State, rec.LastError, rec.LeaseUntil)
	}
	w := httptest.NewRecorder()
	e.srv.Config.Handler.ServeHTTP(w, authedPost("/payouts/acc-1", "k1"))
	if w.Code != http.StatusCreated || runs.Load() != 2 || debits.Load() != 1 {
		t.Errorf("retry: %d, runs %d, debits %d; want 201, 2, 1", w.Code, runs.Load(), debits.Load())
	}
	e.checkOutcomes(t, idem.OutcomePanic, idem.OutcomeExecuted)
}

func authedPost(target, key string) *http.Request {
	r := httptest.NewRequest("POST", target, strings.NewReader(`{"amount":10}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer alice")
	r.Header.Set("Idempotency-Key", key)
	return r
}

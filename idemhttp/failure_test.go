package idemhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// E3: a request for a key in flight is refused at once with 409 and a
// Retry-After in whole seconds, rounded up.
func TestInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		want       string
	}{
		{"Default", 0, "1"},
		{"RoundedUp", 1500 * time.Millisecond, "2"},
		{"AtLeastOne", time.Millisecond, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, withGuardConfig(idem.Config{InFlightRetryAfter: tc.retryAfter}))
			entered, release := make(chan struct{}), make(chan struct{})
			h := &effectHandler{before: func(http.ResponseWriter, *http.Request) {
				close(entered)
				<-release
			}}
			handler := e.mw.Handler(h)
			done := make(chan int)
			go func() { done <- serve(handler, "POST", "/x", "{}", withKey("k")).Code }()
			<-entered

			start := time.Now()
			w := serve(handler, "POST", "/x", "{}", withKey("k"))
			if d := time.Since(start); d > time.Second {
				t.Errorf("409 took %s, want at once", d)
			}
			checkProblem(t, w, idemhttp.ProblemInFlight, http.StatusConflict)
			if got, want := w.Header().Get("Retry-After"), tc.want; got != want {
				t.Errorf("Retry-After: got %q, want %q", got, want)
			}
			// A different body is still "in flight", not a mismatch: the
			// first request has not recorded anything yet.
			checkProblem(t, serve(handler, "POST", "/x", `{"other":1}`, withKey("k")), idemhttp.ProblemInFlight, http.StatusConflict)

			close(release)
			if got, want := <-done, http.StatusCreated; got != want {
				t.Errorf("first request: got %d, want %d", got, want)
			}
			if got, want := h.runs.Load(), int64(1); got != want {
				t.Errorf("handler runs: got %d, want %d", got, want)
			}
		})
	}
}

// E8: a store that cannot be reached fails closed with 503 and Retry-After;
// nothing runs.
func TestUnavailableFailsClosed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.flaky.failBegin.Store(true)
	h := &effectHandler{}
	w := serve(e.mw.Handler(h), "POST", "/x", "{}", withKey("k"))
	checkProblem(t, w, idemhttp.ProblemUnavailable, http.StatusServiceUnavailable)
	if got, want := w.Header().Get("Retry-After"), "5"; got != want {
		t.Errorf("Retry-After: got %q, want %q", got, want)
	}
	if got := h.runs.Load(); got != 0 {
		t.Errorf("handler runs: got %d, want 0", got)
	}
	if !strings.Contains(e.logs.String(), "connection refused") {
		t.Errorf("log: got %q, want the store's error", e.logs)
	}
}

// E8: a commit that fails after the handler ran rolls the effect back and
// answers 503; the handler's response is not sent, and even a fail-open
// route does not run the handler a second time.
func TestCommitFailureRollsBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.flaky.failCommit.Store(true)
	h := &effectHandler{header: http.Header{"Set-Cookie": {"s=1"}}}
	w := serve(e.mw.Route(idemhttp.RouteOptions{FailOpen: true})(h), "POST", "/x", "{}", withKey("k"))
	checkProblem(t, w, idemhttp.ProblemUnavailable, http.StatusServiceUnavailable)
	if got := w.Header().Get("Set-Cookie"); got != "" {
		t.Errorf("Set-Cookie of the rolled-back response: got %q, want none", got)
	}
	if got, want := h.runs.Load(), int64(1); got != want {
		t.Errorf("handler runs: got %d, want %d", got, want)
	}
	if _, ok := e.store.Value("effect/1"); ok {
		t.Errorf("effect: committed, want rolled back")
	}
}

// E8: a route that opts in fails open: the handler runs, unprotected.
func TestUnavailableFailOpen(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{UnavailableRetryAfter: 2500 * time.Millisecond}))
	e.flaky.failBegin.Store(true)
	var inTx bool
	var body string
	h := &effectHandler{before: func(w http.ResponseWriter, r *http.Request) {
		_, inTx = memstore.TxFrom(r.Context())
	}}
	w := serve(e.mw.Route(idemhttp.RouteOptions{FailOpen: true})(h), "POST", "/x", `{"a":1}`, withKey("k"))
	body = w.Body.String()
	if got, want := w.Code, http.StatusCreated; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	if inTx {
		t.Errorf("fail-open handler ran in a transaction")
	}
	if !strings.Contains(body, `{\"a\":1}`) {
		t.Errorf("body seen by the handler: got response %s, want the request body echoed", body)
	}
	// The same Middleware still fails closed on its other routes.
	w = serve(e.mw.Handler(h), "POST", "/x", "{}", withKey("k"))
	checkProblem(t, w, idemhttp.ProblemUnavailable, http.StatusServiceUnavailable)
	if got, want := w.Header().Get("Retry-After"), "3"; got != want {
		t.Errorf("Retry-After: got %q, want %q", got, want)
	}
	if got, want := e.outcomes(), []idem.Outcome{idem.OutcomeFailOpen, idem.OutcomeUnavailable}; !slices.Equal(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
}

func TestRouteOptionsNegativeTTLPanics(t *testing.T) {
	t.Parallel()
	e := setup(t)
	defer func() {
		if recover() == nil {
			t.Errorf("Route with a negative TTL: did not panic")
		}
	}()
	e.mw.Route(idemhttp.RouteOptions{TTL: -time.Second})
}

// A client that has gone away while the store was being asked is logged as
// canceled at Debug level, not as a store failure, and nothing runs.
func TestClientGoneIsNotUnavailable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.flaky.beforeBegin = func(context.Context) { cancel() }
	r := authed(httptest.NewRequestWithContext(ctx, "POST", "/x", strings.NewReader("{}")))
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	e.mw.Handler(h).ServeHTTP(w, r)
	if got := h.runs.Load(); got != 0 {
		t.Errorf("handler runs: got %d, want 0", got)
	}
	if got := e.outcomes(); !slices.Equal(got, []idem.Outcome{idem.OutcomeCanceled}) {
		t.Errorf("outcomes: got %v, want [canceled]", got)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "level=DEBUG") || strings.Contains(logs, "level=ERROR") {
		t.Errorf("log: got %q, want one DEBUG line", logs)
	}
	if e.record(t, alice, "k") != nil {
		t.Error("a record was written for a request whose client had gone")
	}
}

// A deadline that runs out while the store is being asked is the server's
// own limit: 503 unavailable, logged as an error, not a client that left.
func TestDeadlineIsUnavailable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	ctx := newExpiringCtx()
	e.flaky.beforeBegin = func(context.Context) { ctx.expire() }
	r := authed(httptest.NewRequestWithContext(ctx, "POST", "/x", strings.NewReader("{}")))
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	e.mw.Handler(h).ServeHTTP(w, r)
	checkProblem(t, w, idemhttp.ProblemUnavailable, http.StatusServiceUnavailable)
	if got := e.outcomes(); !slices.Equal(got, []idem.Outcome{idem.OutcomeUnavailable}) {
		t.Errorf("outcomes: got %v, want [unavailable]", got)
	}
	if got := h.runs.Load(); got != 0 {
		t.Errorf("handler runs: got %d, want 0", got)
	}
}

// A store that fails for its own reasons while the client happens to be
// gone is still a store failure: unavailable, not canceled.
func TestStoreFailureWithClientGoneIsUnavailable(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.flaky.failBegin.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.flaky.beforeBegin = func(context.Context) { cancel() }
	r := authed(httptest.NewRequestWithContext(ctx, "POST", "/x", strings.NewReader("{}")))
	r.Header.Set("Idempotency-Key", "k")
	e.mw.Handler(&effectHandler{}).ServeHTTP(httptest.NewRecorder(), r)
	if got := e.outcomes(); !slices.Equal(got, []idem.Outcome{idem.OutcomeUnavailable}) {
		t.Errorf("outcomes: got %v, want [unavailable]", got)
	}
}

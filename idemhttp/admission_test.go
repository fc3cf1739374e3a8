package idemhttp_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// holder is a handler that holds the first n requests until release is
// closed, and answers the others at once.
type holder struct {
	n       int64
	seen    atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func newHolder(n int) *holder {
	return &holder{n: int64(n), entered: make(chan struct{}, n), release: make(chan struct{})}
}

func (h *holder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.seen.Add(1) <= h.n {
		h.entered <- struct{}{}
		<-h.release
	}
	w.WriteHeader(http.StatusCreated)
}

// hold sends n requests with distinct keys through handler and returns once
// all of them are inside h; wait waits for their answers.
func hold(t *testing.T, handler http.Handler, h *holder, n int) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if got := serve(handler, "POST", "/x", "{}", withKey(fmt.Sprintf("held-%d", i))).Code; got != http.StatusCreated {
				t.Errorf("held request %d: got %d, want 201", i, got)
			}
		})
	}
	for range n {
		<-h.entered
	}
	return wg.Wait
}

// tryOne sends one more request, whose body counts the bytes read from it
// before the answer.
func tryOne(handler http.Handler, key string) (*httptest.ResponseRecorder, int) {
	body := &countingReader{r: strings.NewReader(`{"amount":10}`)}
	r := authed(httptest.NewRequest("POST", "/x", nil))
	r.Body = io.NopCloser(body)
	r.ContentLength = 13
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	handler.ServeHTTP(w, r)
	return w, body.n
}

// With Config.MaxConcurrent requests in progress, one more is
// answered 503 too-busy with Retry-After before its body is read, and
// nothing runs for it; once a slot is free again, requests are served.
func TestMaxConcurrent(t *testing.T) {
	t.Parallel()
	const n = 3
	e := setup(t, withConfig(idemhttp.Config{MaxConcurrent: n}))
	h := newHolder(n)
	handler := e.mw.Handler(h)
	wait := hold(t, handler, h, n)

	w, read := tryOne(handler, "one-more")
	checkProblem(t, w, idemhttp.ProblemTooBusy, http.StatusServiceUnavailable)
	if got, want := w.Header().Get("Retry-After"), "1"; got != want {
		t.Errorf("Retry-After: got %q, want %q", got, want)
	}
	if read != 0 {
		t.Errorf("body bytes read before the 503: got %d, want 0", read)
	}
	if got, want := h.seen.Load(), int64(n); got != want {
		t.Errorf("handler runs: got %d, want %d", got, want)
	}
	if e.record(t, alice, "one-more") != nil {
		t.Errorf("a record for the refused request")
	}
	// Requests that the middleware does not protect are not counted.
	if got, want := serve(handler, "GET", "/x", "").Code, http.StatusCreated; got != want {
		t.Errorf("GET while busy: got %d, want %d", got, want)
	}

	close(h.release)
	wait()
	if w, _ := tryOne(handler, "one-more"); w.Code != http.StatusCreated {
		t.Errorf("after the held requests: got %d, want 201", w.Code)
	}
	outcomes := e.outcomes()
	if got, want := outcomes[0], idem.OutcomeTooBusy; got != want {
		t.Errorf("first outcome: got %q, want %q (all: %v)", got, want, outcomes)
	}
	if !strings.Contains(e.logs.String(), "level=WARN msg=\"idemhttp: too_busy\"") {
		t.Errorf("log: got %q, want a WARN too_busy line", e.logs)
	}
}

// A request whose handler panicked, or that was refused, gives its slot
// back.
func TestMaxConcurrentSlotsAreReturned(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{MaxConcurrent: 1}))
	panics := e.mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("bug") }))
	func() {
		defer func() { _ = recover() }()
		serve(panics, "POST", "/x", "{}", withKey("p"))
	}()
	handler := e.mw.Handler(&effectHandler{})
	serve(handler, "POST", "/x", "{}", withKey("p"), asPrincipal(""))                // no principal
	serve(handler, "POST", "/x", strings.Repeat("x", 2<<20), withKey("p"))           // too large
	serve(handler, "POST", "/x", "{}", withKey("p"), header("Idempotency-Key", "q")) // invalid key
	if got, want := serve(handler, "POST", "/x", "{}", withKey("k")).Code, http.StatusCreated; got != want {
		t.Errorf("after the refusals: got %d, want %d", got, want)
	}
	want := []idem.Outcome{idem.OutcomePanic, idem.OutcomeNoPrincipal, idem.OutcomeTooLarge,
		idem.OutcomeInvalidKey, idem.OutcomeExecuted}
	if got := e.outcomes(); !slices.Equal(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
}

// The default bound is DefaultMaxConcurrent; a negative MaxConcurrent
// means no bound.
func TestMaxConcurrentDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		max   int
		held  int
		admit bool
	}{
		{"Default", 0, idemhttp.DefaultMaxConcurrent, false},
		{"Unbounded", -1, idemhttp.DefaultMaxConcurrent + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, withConfig(idemhttp.Config{MaxConcurrent: tc.max}))
			h := newHolder(tc.held)
			handler := e.mw.Handler(h)
			wait := hold(t, handler, h, tc.held)
			w, _ := tryOne(handler, "one-more")
			close(h.release)
			wait()
			if got, want := w.Code == http.StatusCreated, tc.admit; got != want {
				t.Errorf("request %d: got %d, want admitted=%v", tc.held+1, w.Code, want)
			}
		})
	}
}

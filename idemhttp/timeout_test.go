package idemhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// trickle sends a POST with a 33-byte body to addr, one byte every gap,
// and returns the response. The body goes on being sent while the response
// is read, as a slow client's would.
func trickle(t *testing.T, addr string, gap time.Duration) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	body := `{"to":"bob","amount":10,"n":"xy"}`
	if len(body) != 33 {
		t.Fatalf("body: %d bytes, want 33", len(body))
	}
	_, err = fmt.Fprintf(conn, "POST /transfers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Idempotency-Key: slow-1\r\nContent-Length: %d\r\n\r\n", len(body))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for i := range len(body) {
			select {
			case <-stop:
				return
			case <-time.After(gap):
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// checkTimedOut asserts that the slow request was answered 408
// request-timeout, that nothing ran or was recorded, and that nothing was
// logged as a store failure.
func checkTimedOut(t *testing.T, e *env, h *effectHandler, resp *http.Response) {
	t.Helper()
	if got, want := resp.StatusCode, http.StatusRequestTimeout; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), idemhttp.ProblemRequestTimeout) {
		t.Errorf("body: got %s, want a %s problem", b, idemhttp.ProblemRequestTimeout)
	}
	if got := h.runs.Load(); got != 0 {
		t.Errorf("handler runs: got %d, want 0", got)
	}
	if e.record(t, alice, "slow-1") != nil {
		t.Errorf("a record was written for a request that was not received")
	}
	if got, want := e.outcomes(), []idem.Outcome{idem.OutcomeRequestTimeout}; !slices.Equal(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
	if logs := e.logs.String(); strings.Contains(logs, "level=ERROR") || strings.Contains(logs, "unavailable") {
		t.Errorf("logs: got %q, want no store failure", logs)
	}
}

// withAlice is an authentication middleware that makes every caller alice.
func withAlice(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, authed(r)) })
}

// A client too slow to send its body within the server's read
// timeout is answered 408 request-timeout, not 400 or 503.
func TestSlowBodyHitsReadTimeout(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	srv := httptest.NewUnstartedServer(withAlice(e.mw.Handler(h)))
	srv.Config.ReadTimeout = 500 * time.Millisecond
	srv.Start()
	defer srv.Close()

	resp := trickle(t, srv.Listener.Addr().String(), 150*time.Millisecond)
	checkTimedOut(t, e, h, resp)
	if !resp.Close {
		t.Errorf("Connection: close: missing, want the connection closed")
	}
}

// A request timeout (the context deadline that
// `idem serve -request-timeout` sets) that runs out while a 33-byte body
// is trickling in, with a healthy store, is a 408, not 503
// store-unavailable with an ERROR line.
func TestSlowBodyOutlivesRequestDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	deadline := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), 300*time.Millisecond)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	srv := httptest.NewServer(deadline(withAlice(e.mw.Handler(h))))
	defer srv.Close()

	checkTimedOut(t, e, h, trickle(t, srv.Listener.Addr().String(), 30*time.Millisecond))
}

// The request's context ends while its body is being read, or after,
// before the store is asked: 408 and nothing else. A deadline is a
// request_timeout; a client that left is canceled. Neither is a 400 nor a
// store failure, and the store is never asked.
func TestContextEndsBeforeTheStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// body returns the request body; it may end ctx.
		body func(ctx *expiringCtx) io.Reader
		// scopeEnds ends the context in Config.Scope, after the body.
		scopeEnds bool
		want      idem.Outcome
	}{
		{"DeadlineDuringReadBodyCompletes", func(ctx *expiringCtx) io.Reader {
			return io.MultiReader(strings.NewReader(`{"amount":`), &onRead{f: ctx.expire}, strings.NewReader(`10}`))
		}, false, idem.OutcomeRequestTimeout},
		{"DeadlineDuringReadBodyFails", func(ctx *expiringCtx) io.Reader {
			return io.MultiReader(strings.NewReader(`{"amount":`), &onRead{f: ctx.expire, err: errors.New("read aborted")})
		}, false, idem.OutcomeRequestTimeout},
		{"ReadTimeoutError", func(*expiringCtx) io.Reader {
			return io.MultiReader(strings.NewReader(`{"amount":`), &onRead{err: &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}})
		}, false, idem.OutcomeRequestTimeout},
		{"DeadlineAfterBody", nil, true, idem.OutcomeRequestTimeout},
		{"ClientLeftDuringRead", func(ctx *expiringCtx) io.Reader {
			return io.MultiReader(strings.NewReader(`{"amount":`), &onRead{f: ctx.cancel, err: io.ErrUnexpectedEOF})
		}, false, idem.OutcomeCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := newExpiringCtx()
			cfg := idemhttp.Config{}
			if tc.scopeEnds {
				cfg.Scope = func(r *http.Request) (string, error) {
					ctx.expire()
					return idemhttp.DefaultScope(r)
				}
			}
			e := setup(t, withConfig(cfg))
			e.flaky.beforeBegin = func(context.Context) { t.Errorf("the store was asked") }
			h := &effectHandler{}

			r := authed(httptest.NewRequestWithContext(ctx, "POST", "/x", nil))
			r.Header.Set("Idempotency-Key", "slow-1")
			r.ContentLength = -1
			if tc.body != nil {
				r.Body = io.NopCloser(tc.body(ctx))
			} else {
				r.Body = io.NopCloser(strings.NewReader(`{"amount":10}`))
			}
			w := httptest.NewRecorder()
			e.mw.Handler(h).ServeHTTP(w, r)

			checkProblem(t, w, idemhttp.ProblemRequestTimeout, http.StatusRequestTimeout)
			if got := h.runs.Load(); got != 0 {
				t.Errorf("handler runs: got %d, want 0", got)
			}
			if got, want := e.outcomes(), []idem.Outcome{tc.want}; !slices.Equal(got, want) {
				t.Errorf("outcomes: got %v, want %v", got, want)
			}
			if logs := e.logs.String(); strings.Contains(logs, "level=ERROR") {
				t.Errorf("logs: got %q, want no error", logs)
			}
		})
	}
}

// onRead is a reader that calls f on its first Read, then returns err, or
// io.EOF if err is nil.
type onRead struct {
	f   func()
	err error
}

func (o *onRead) Read([]byte) (int, error) {
	if o.f != nil {
		o.f()
		o.f = nil
	}
	if o.err != nil {
		return 0, o.err
	}
	return 0, io.EOF
}

// timeoutError is a net.Error that timed out, as a read past a deadline
// set by a server other than net/http's might return.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// With no read timeout on the server, the request's own deadline
// still ends a body that trickles in: the read is cut when the context
// ends (408, nothing run), rather than when the last byte arrives, and the
// request's concurrency slot is free again for the next caller.
func TestTrickleIsCutAtTheRequestDeadline(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{MaxConcurrent: 1}))
	h := &effectHandler{}
	deadline := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), 300*time.Millisecond)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	srv := httptest.NewServer(deadline(withAlice(e.mw.Handler(h))))
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	const body = `{"to":"bob","amount":10}`
	if _, err := fmt.Fprintf(conn, "POST /transfers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Idempotency-Key: slow-1\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	stop := make(chan struct{})
	defer close(stop)
	go func() { // one byte a second: the whole body would take 24 s
		for i := range len(body) {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			sent.Add(1)
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if n := sent.Load(); n >= int32(len(body)) {
		t.Errorf("the answer came after the whole body (%d bytes): the read was not cut at the deadline", n)
	}
	checkTimedOut(t, e, h, resp)

	// The slot is free: the next request is served, not refused too-busy.
	req, _ := http.NewRequest("POST", srv.URL+"/transfers", strings.NewReader(`{"to":"bob","amount":10}`))
	req.Header.Set("Idempotency-Key", "next-1")
	next, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	next.Body.Close()
	if next.StatusCode != http.StatusCreated && next.StatusCode != http.StatusOK {
		t.Errorf("next request: status %d, want it served", next.StatusCode)
	}
}

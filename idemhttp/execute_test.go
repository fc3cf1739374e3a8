package idemhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
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

// E1, E6: the handler runs inside the transaction, and its response is
// recorded there with the effect.
func TestFirstExecutionRunsInTransactionAndRecords(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var inTx bool
	h := &effectHandler{
		header: http.Header{
			"Content-Type": {"application/json"},
			"Location":     {"/transfers/1"},
			"Etag":         {`"v1"`},
			"Set-Cookie":   {"session=abc"},
			"X-Trace":      {"t-1"},
			"Connection":   {"close"},
		},
		before: func(w http.ResponseWriter, r *http.Request) {
			_, inTx = memstore.TxFrom(r.Context())
		},
	}
	w := serve(e.mw.Handler(h), "POST", "/transfers", `{"amount":10}`, withKey("k1"))

	if !inTx {
		t.Errorf("memstore.TxFrom in the handler: got no transaction, want one")
	}
	if got, want := w.Code, http.StatusCreated; got != want {
		t.Fatalf("status: got %d, want %d", got, want)
	}
	// The first client sees every header the handler set.
	for _, name := range []string{"Location", "Etag", "Set-Cookie", "X-Trace"} {
		if w.Header().Get(name) == "" {
			t.Errorf("header %s: got none, want the handler's", name)
		}
	}
	if got := w.Header().Get(idemhttp.ReplayedHeader); got != "" {
		t.Errorf("%s on a first execution: got %q, want none", idemhttp.ReplayedHeader, got)
	}
	if _, ok := e.store.Value("effect/1"); !ok {
		t.Errorf("effect: not committed")
	}
	rec := e.record(t, alice, "k1")
	if rec == nil {
		t.Fatal("record: none, want one")
	}
	if got, want := rec.Result.Status, http.StatusCreated; got != want {
		t.Errorf("recorded status: got %d, want %d", got, want)
	}
	if got, want := string(rec.Result.Body), w.Body.String(); got != want {
		t.Errorf("recorded body: got %q, want %q", got, want)
	}
	var names []string
	for k := range rec.Result.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	if got, want := names, []string{"Content-Type", "Etag", "Location"}; !slices.Equal(got, want) {
		t.Errorf("recorded headers: got %v, want %v", got, want)
	}
}

// E4: a retry gets the original status, recorded headers and body byte for
// byte, plus Idempotent-Replayed: true, and the handler does not run again.
func TestReplayReturnsOriginalResponse(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusOK, http.StatusCreated, http.StatusNoContent, http.StatusSeeOther,
		http.StatusBadRequest, http.StatusPaymentRequired, http.StatusConflict} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			h := &effectHandler{status: status, header: http.Header{
				"Content-Type": {"application/json; charset=utf-8"},
				"Location":     {"/somewhere"},
				"Set-Cookie":   {"session=abc"},
			}}
			if status == http.StatusNoContent {
				h.body = "-" // a body the recorder must refuse
			}
			handler := e.mw.Handler(h)
			first := serve(handler, "POST", "/pay", `{"a":1}`, withKey("k"))
			second := serve(handler, "POST", "/pay", `{"a":1}`, withKey(`"k"`))

			if got, want := h.runs.Load(), int64(1); got != want {
				t.Errorf("handler runs: got %d, want %d", got, want)
			}
			if got, want := second.Code, first.Code; got != want {
				t.Errorf("replayed status: got %d, want %d", got, want)
			}
			if got, want := second.Code, status; got != want {
				t.Errorf("status: got %d, want %d", got, want)
			}
			if !bytes.Equal(second.Body.Bytes(), first.Body.Bytes()) {
				t.Errorf("replayed body: got %q, want %q", second.Body, first.Body)
			}
			if got, want := second.Header().Get(idemhttp.ReplayedHeader), "true"; got != want {
				t.Errorf("%s: got %q, want %q", idemhttp.ReplayedHeader, got, want)
			}
			for _, name := range []string{"Content-Type", "Location"} {
				if got, want := second.Header().Get(name), first.Header().Get(name); got != want {
					t.Errorf("replayed %s: got %q, want %q", name, got, want)
				}
			}
			if got := second.Header().Get("Set-Cookie"); got != "" {
				t.Errorf("replayed Set-Cookie: got %q, want none", got)
			}
			if got, want := e.outcomes(), []idem.Outcome{idem.OutcomeExecuted, idem.OutcomeReplayed}; !slices.Equal(got, want) {
				t.Errorf("outcomes: got %v, want %v", got, want)
			}
		})
	}
}

// E6: a 5xx is sent to the client but rolled back and not recorded; the
// retry runs the handler again.
func TestServerErrorRollsBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{status: http.StatusInternalServerError, body: "boom", header: http.Header{"X-Debug": {"1"}}}
	handler := e.mw.Handler(h)

	w := serve(handler, "POST", "/transfers", `{}`, withKey("k"))
	if got, want := w.Code, http.StatusInternalServerError; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	if got, want := w.Body.String(), "boom"; got != want {
		t.Errorf("body: got %q, want the handler's %q", got, want)
	}
	if got, want := w.Header().Get("X-Debug"), "1"; got != want {
		t.Errorf("X-Debug: got %q, want %q", got, want)
	}
	if _, ok := e.store.Value("effect/1"); ok {
		t.Errorf("effect of a 5xx: committed, want rolled back")
	}
	if rec := e.record(t, alice, "k"); rec != nil {
		t.Errorf("record after a 5xx: got %+v, want none", rec)
	}

	h.status = http.StatusCreated
	w = serve(handler, "POST", "/transfers", `{}`, withKey("k"))
	if got, want := w.Code, http.StatusCreated; got != want {
		t.Errorf("retry status: got %d, want %d", got, want)
	}
	if got, want := h.runs.Load(), int64(2); got != want {
		t.Errorf("handler runs: got %d, want %d", got, want)
	}
	if _, ok := e.store.Value("effect/2"); !ok {
		t.Errorf("effect of the retry: not committed")
	}
	if got, want := e.outcomes(), []idem.Outcome{idem.OutcomeRolledBack, idem.OutcomeExecuted}; !slices.Equal(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
}

// E6: a panic rolls back, records nothing, and goes on up the stack; the
// retry runs the handler again.
func TestPanicRollsBackAndIsReraised(t *testing.T) {
	t.Parallel()
	e := setup(t)
	panics := true
	h := &effectHandler{before: func(w http.ResponseWriter, r *http.Request) {
		tx, _ := memstore.TxFrom(r.Context())
		tx.Set("before-panic", "x")
		if panics {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "partial")
			panic("handler bug")
		}
	}}
	handler := e.mw.Handler(h)

	w := httptest.NewRecorder()
	got := func() (p any) {
		defer func() { p = recover() }()
		r := authed(httptest.NewRequest("POST", "/transfers", strings.NewReader(`{}`)))
		r.Header.Set("Idempotency-Key", "k")
		handler.ServeHTTP(w, r)
		return nil
	}()
	if want := "handler bug"; got != want {
		t.Fatalf("recovered: got %v, want %v", got, want)
	}
	if w.Body.Len() != 0 || w.Header().Get("Content-Type") != "" {
		t.Errorf("response after a panic: got %q with %v, want nothing sent", w.Body, w.Header())
	}
	if _, ok := e.store.Value("before-panic"); ok {
		t.Errorf("effect of a panicking handler: committed, want rolled back")
	}
	if rec := e.record(t, alice, "k"); rec != nil {
		t.Errorf("record after a panic: got %+v, want none", rec)
	}

	panics = false
	w2 := serve(handler, "POST", "/transfers", `{}`, withKey("k"))
	if got, want := w2.Code, http.StatusCreated; got != want {
		t.Errorf("retry status: got %d, want %d", got, want)
	}
	if got, want := h.runs.Load(), int64(2); got != want {
		t.Errorf("handler runs: got %d, want %d", got, want)
	}
	if got, want := e.outcomes(), []idem.Outcome{idem.OutcomePanic, idem.OutcomeExecuted}; !slices.Equal(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
}

// A panic through a real server: net/http's recovery sees it, the server
// goes on, and the retry runs.
func TestPanicThroughServer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var n int
	handler := e.mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		tx, _ := memstore.TxFrom(r.Context())
		tx.Set("effect", "x")
		if n == 1 {
			panic(http.ErrAbortHandler) // aborts quietly
		}
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(bearerAuth(handler))
	defer srv.Close()

	post := func() (*http.Response, error) {
		req, _ := http.NewRequest("POST", srv.URL+"/x", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer alice")
		req.Header.Set("Idempotency-Key", "k")
		return srv.Client().Do(req)
	}
	if resp, err := post(); err == nil {
		resp.Body.Close()
		t.Fatalf("first request: got status %d, want the connection aborted", resp.StatusCode)
	}
	if _, ok := e.store.Value("effect"); ok {
		t.Errorf("effect: committed, want rolled back")
	}
	resp, err := post()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusCreated; got != want {
		t.Errorf("retry status: got %d, want %d", got, want)
	}
	if _, ok := e.store.Value("effect"); !ok {
		t.Errorf("effect of the retry: not committed")
	}
}

// A handler that writes nothing answers 200 with an empty body, recorded.
func TestEmptyResponseIsRecordedAs200(t *testing.T) {
	t.Parallel()
	e := setup(t)
	handler := e.mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := serve(handler, "POST", "/x", "", withKey("k"))
	if got, want := w.Code, http.StatusOK; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	rec := e.record(t, alice, "k")
	if rec == nil || rec.Result.Status != http.StatusOK || len(rec.Result.Body) != 0 {
		t.Errorf("record: got %+v, want status 200 and no body", rec)
	}
}

// 1xx statuses are dropped (nothing may be sent before the final response is
// recorded); the final status is what counts.
func TestInformationalStatusIsDropped(t *testing.T) {
	t.Parallel()
	e := setup(t)
	handler := e.mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusAccepted)
		w.WriteHeader(http.StatusTeapot) // ignored, as net/http does
		io.WriteString(w, "ok")
	}))
	w := serve(handler, "POST", "/x", "", withKey("k"))
	if got, want := w.Code, http.StatusAccepted; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	if got, want := w.Header().Get("Content-Length"), "2"; got != want {
		t.Errorf("Content-Length: got %q, want %q", got, want)
	}
}

// The handler reads the same body the fingerprint was computed from, and
// headers set by outer middleware survive.
func TestHandlerSeesBodyAndOuterHeaders(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var gotBody string
	var gotLen int64
	handler := e.mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody, gotLen = string(b), r.ContentLength
		if got, want := w.Header().Get("X-Request-Id"), "rid"; got != want {
			t.Errorf("outer header seen by the handler: got %q, want %q", got, want)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "rid")
		handler.ServeHTTP(w, r)
	})
	w := serve(outer, "POST", "/x", `{"a": 1}`, withKey("k"))
	if got, want := gotBody, `{"a": 1}`; got != want {
		t.Errorf("body: got %q, want %q", got, want)
	}
	if got, want := gotLen, int64(8); got != want {
		t.Errorf("ContentLength: got %d, want %d", got, want)
	}
	if got, want := w.Header().Get("X-Request-Id"), "rid"; got != want {
		t.Errorf("X-Request-Id: got %q, want %q", got, want)
	}
}

// Config.Methods chooses what is protected; other methods pass through with
// the original ResponseWriter and no transaction.
func TestMethodsPassThrough(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{Methods: []string{"PUT"}}))
	for _, tc := range []struct {
		method    string
		protected bool
	}{{"GET", false}, {"POST", false}, {"DELETE", false}, {"PUT", true}} {
		t.Run(tc.method, func(t *testing.T) {
			t.Parallel()
			orig := httptest.NewRecorder()
			var sameWriter, inTx bool
			handler := e.mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sameWriter = w == http.ResponseWriter(orig)
				_, inTx = memstore.TxFrom(r.Context())
			}))
			r := authed(httptest.NewRequest(tc.method, "/x", nil))
			r.Header.Set("Idempotency-Key", "k-"+tc.method)
			handler.ServeHTTP(orig, r)
			if got, want := sameWriter, !tc.protected; got != want {
				t.Errorf("original ResponseWriter: got %v, want %v", got, want)
			}
			if got, want := inTx, tc.protected; got != want {
				t.Errorf("in a transaction: got %v, want %v", got, want)
			}
		})
	}
}

// The default methods are POST and PATCH.
func TestDefaultMethods(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	handler := e.mw.Handler(h)
	for method, want := range map[string]int{
		"POST": http.StatusBadRequest, "PATCH": http.StatusBadRequest,
		"PUT": http.StatusCreated, "DELETE": http.StatusCreated, "GET": http.StatusCreated,
	} {
		if got := serve(handler, method, "/x", "").Code; got != want {
			t.Errorf("%s without a key: got %d, want %d", method, got, want)
		}
	}
}

// Streaming cannot work through a buffer: the protected writer offers
// neither Flusher nor Hijacker, and ResponseController says so.
func TestProtectedWriterRefusesStreamingAndHijack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	handler := e.mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(http.Flusher); ok {
			t.Errorf("protected writer implements http.Flusher")
		}
		if _, ok := w.(http.Hijacker); ok {
			t.Errorf("protected writer implements http.Hijacker")
		}
		rc := http.NewResponseController(w)
		if err := rc.Flush(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("ResponseController.Flush: got %v, want ErrNotSupported", err)
		}
		if _, _, err := rc.Hijack(); !errors.Is(err, http.ErrNotSupported) {
			t.Errorf("ResponseController.Hijack: got %v, want ErrNotSupported", err)
		}
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("ResponseController.SetWriteDeadline: got %v, want nil", err)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	srv := httptest.NewServer(bearerAuth(handler))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, nil)
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Idempotency-Key", "k")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusCreated; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
}

// Optional routes run a request without a key unprotected, untouched; a
// present but invalid key is still refused.
func TestOptionalKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	orig := httptest.NewRecorder()
	var sameWriter, inTx bool
	handler := e.mw.Optional(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sameWriter = w == http.ResponseWriter(orig)
		_, inTx = memstore.TxFrom(r.Context())
		w.WriteHeader(http.StatusCreated)
	}))
	handler.ServeHTTP(orig, httptest.NewRequest("POST", "/x", nil))
	if got, want := orig.Code, http.StatusCreated; got != want {
		t.Errorf("status without a key: got %d, want %d", got, want)
	}
	if !sameWriter || inTx {
		t.Errorf("without a key: original writer %v, in a transaction %v; want true, false", sameWriter, inTx)
	}
	w := serve(handler, "POST", "/x", "", withKey("a b"))
	checkProblem(t, w, idemhttp.ProblemInvalidKey, http.StatusBadRequest)

	serve(handler, "POST", "/x", "", withKey("k"))
	if !inTx {
		t.Errorf("with a key: not in a transaction")
	}
	if got, want := e.outcomes(), []idem.Outcome{idem.OutcomeUnprotected, idem.OutcomeInvalidKey, idem.OutcomeExecuted}; !slices.Equal(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
}

// E7: RouteOptions.TTL sets the record's lifetime for the route.
func TestRouteTTL(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := setup(t, withGuardConfig(idem.Config{Now: func() time.Time { return now }}))
	handler := e.mw.Route(idemhttp.RouteOptions{TTL: time.Hour})(&effectHandler{})
	serve(handler, "POST", "/x", "", withKey("k"))
	rec := e.record(t, alice, "k")
	if rec == nil {
		t.Fatal("no record")
	}
	if got, want := rec.ExpiresAt, now.Add(time.Hour); !got.Equal(want) {
		t.Errorf("ExpiresAt: got %s, want %s", got, want)
	}
}

// E6: a 408 or 499 written because the request's context ended speaks of
// that attempt, not of the request: it rolls back and is not replayed. The
// same 408 with the context alive is an answer like any 4xx, and a 2xx
// written as the client leaves is recorded (the work is done).
func TestStatusOfAnEndedRequestIsNotRecorded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		status   int
		cancel   bool
		recorded bool
	}{
		{"499AfterCancel", 499, true, false},
		{"408AfterCancel", http.StatusRequestTimeout, true, false},
		{"408Alive", http.StatusRequestTimeout, false, true},
		{"201AfterCancel", http.StatusCreated, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := &effectHandler{status: tt.status, body: "x"}
			if tt.cancel {
				h.before = func(http.ResponseWriter, *http.Request) { cancel() }
			}
			r := authed(httptest.NewRequestWithContext(ctx, "POST", "/x", strings.NewReader("{}")))
			r.Header.Set("Idempotency-Key", "k")
			e.mw.Handler(h).ServeHTTP(httptest.NewRecorder(), r)
			_, committed := e.store.Value("effect/1")
			rec := e.record(t, alice, "k")
			if committed != tt.recorded || (rec != nil) != tt.recorded {
				t.Errorf("effect committed %v, record %v; want both %v", committed, rec != nil, tt.recorded)
			}
		})
	}
}

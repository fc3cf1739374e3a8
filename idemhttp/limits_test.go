package idemhttp_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/idemhttp"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// E9: a body over the limit is a 413 before any work: the decision reads no
// further than limit+1 bytes (none when Content-Length already says so);
// once the answer is sent, the rest of the body is discarded so that the
// client can read it.
func TestRequestTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 100
	for _, tc := range []struct {
		name          string
		size          int
		contentLength int64 // -1: unknown (chunked)
		status        int
		maxRead       int
	}{
		{"AtLimit", limit, limit, http.StatusCreated, limit},
		{"AtLimitChunked", limit, -1, http.StatusCreated, limit},
		{"ContentLengthOver", 10 * limit, 10 * limit, http.StatusRequestEntityTooLarge, 10 * limit},
		{"ChunkedOver", 10 * limit, -1, http.StatusRequestEntityTooLarge, 10 * limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, withConfig(idemhttp.Config{MaxRequestBody: limit}))
			h := &effectHandler{body: "ok"}
			body := &countingReader{r: strings.NewReader(strings.Repeat("x", tc.size))}
			r := authed(httptest.NewRequest("POST", "/x", nil))
			r.Body = io.NopCloser(body)
			r.ContentLength = tc.contentLength
			r.Header.Set("Idempotency-Key", "k")
			w := httptest.NewRecorder()
			var readAtAnswer int
			e.mw.Handler(h).ServeHTTP(&answerSpy{ResponseRecorder: w, onWrite: func() {
				if readAtAnswer == 0 {
					readAtAnswer = body.n
				}
			}}, r)
			if tc.status == http.StatusRequestEntityTooLarge && tc.contentLength >= 0 && readAtAnswer != 0 {
				t.Errorf("bytes read before the 413: got %d, want 0 (Content-Length decides)", readAtAnswer)
			}
			if tc.status == http.StatusRequestEntityTooLarge && readAtAnswer > limit+1 {
				t.Errorf("bytes read before the 413: got %d, want at most %d", readAtAnswer, limit+1)
			}

			if tc.status == http.StatusRequestEntityTooLarge {
				checkProblem(t, w, idemhttp.ProblemRequestTooLarge, tc.status)
				if got := h.runs.Load(); got != 0 {
					t.Errorf("handler runs: got %d, want 0", got)
				}
				if e.record(t, alice, "k") != nil {
					t.Errorf("record after 413: got one, want none")
				}
			} else if got, want := w.Code, tc.status; got != want {
				t.Errorf("status: got %d, want %d", got, want)
			}
			if body.n > tc.maxRead {
				t.Errorf("bytes read: got %d, want at most %d", body.n, tc.maxRead)
			}
		})
	}
}

// answerSpy calls onWrite when the answer's header is written.
type answerSpy struct {
	*httptest.ResponseRecorder
	onWrite func()
}

func (a *answerSpy) WriteHeader(code int) {
	a.onWrite()
	a.ResponseRecorder.WriteHeader(code)
}

// A client that writes its whole over-limit body before reading the answer
// (as Python's http.client does) reads the 413, not a connection reset.
func TestRequestTooLargeClientWritesFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv := httptest.NewServer(e.mw.Handler(&effectHandler{}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const size = 8 << 20
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(conn, "POST /x HTTP/1.1\r\nHost: x\r\nIdempotency-Key: big\r\nContent-Length: %d\r\n\r\n", size); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for sent := 0; sent < size; sent += len(chunk) {
		if _, err := conn.Write(chunk); err != nil {
			t.Fatalf("writing the body: %v (the server reset the connection instead of reading the rest)", err)
		}
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status: got %d, want 413", res.StatusCode)
	}
}

// An outer http.MaxBytesReader that trips is a 413 too; any other read
// error is a 400.
func TestUnreadableBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	handler := e.mw.Handler(h)

	r := authed(httptest.NewRequest("POST", "/x", nil))
	r.Body = io.NopCloser(io.MultiReader(strings.NewReader("abc"), errReader{}))
	r.ContentLength = -1
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	handler.ServeHTTP(w, r)
	checkProblem(t, w, idemhttp.ProblemBadRequest, http.StatusBadRequest)

	r = authed(httptest.NewRequest("POST", "/x", strings.NewReader(strings.Repeat("x", 20))))
	r.Header.Set("Idempotency-Key", "k")
	r.ContentLength = -1
	w = httptest.NewRecorder()
	r.Body = http.MaxBytesReader(w, r.Body, 10)
	handler.ServeHTTP(w, r)
	checkProblem(t, w, idemhttp.ProblemRequestTooLarge, http.StatusRequestEntityTooLarge)

	if got := h.runs.Load(); got != 0 {
		t.Errorf("handler runs: got %d, want 0", got)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// E9: a response over the recording limit is rolled back and answered 500,
// with one clear log line.
func TestResponseTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 64
	e := setup(t, withConfig(idemhttp.Config{MaxResponseBody: limit}))
	var writeErr error
	size := limit + 1
	handler := e.mw.Handler(&effectHandler{before: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, writeErr = io.WriteString(w, strings.Repeat("x", size))
	}, body: " "})

	w := serve(handler, "POST", "/x", "", withKey("k"))
	checkProblem(t, w, idemhttp.ProblemResponseTooLarge, http.StatusInternalServerError)
	if writeErr == nil {
		t.Errorf("handler's Write over the limit: got no error, want one")
	}
	if _, ok := e.store.Value("effect/1"); ok {
		t.Errorf("effect: committed, want rolled back")
	}
	if e.record(t, alice, "k") != nil {
		t.Errorf("record: got one, want none")
	}
	logs := e.logs.String()
	if got, want := strings.Count(logs, "level=ERROR"), 1; got != want {
		t.Errorf("error log lines: got %d, want %d:\n%s", got, want, logs)
	}
	if !strings.Contains(logs, "MaxResponseBody (64 bytes)") {
		t.Errorf("log: got %q, want it to name MaxResponseBody and the limit", logs)
	}

	// Exactly at the limit it is recorded.
	size = limit - 1
	w = serve(handler, "POST", "/x", "", withKey("k"))
	if got, want := w.Code, http.StatusOK; got != want { // the first Write sent 200
		t.Errorf("at the limit: got %d, want %d", got, want)
	}
	if got, want := w.Body.Len(), limit; got != want {
		t.Errorf("body length at the limit: got %d, want %d", got, want)
	}
}

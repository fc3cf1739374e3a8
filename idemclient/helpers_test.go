package idemclient_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem/idemclient"
)

// fakeTime is an injected clock and sleep: Sleep records the delay and moves
// the clock forward instead of waiting.
type fakeTime struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeTime() *fakeTime {
	return &fakeTime{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (f *fakeTime) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTime) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sleeps = append(f.sleeps, d)
	f.now = f.now.Add(d)
	return ctx.Err()
}

func (f *fakeTime) Sleeps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.sleeps...)
}

// seenRequest is what the scripted server saw of one attempt.
type seenRequest struct {
	Key  string // the raw Idempotency-Key field value
	Keys int    // how many Idempotency-Key fields the request carried
	Body string
}

// scriptServer answers attempt n (from 1) with respond(n, w, r) and records
// every attempt.
type scriptServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

func (s *scriptServer) Seen() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

type testEnv struct {
	client *idemclient.Client
	server *scriptServer
	clock  *fakeTime
}

// setup starts a loopback server driven by respond and a client with an
// injected clock and sleep; edit adjusts the client's config.
func setup(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request), edit func(*idemclient.Config)) *testEnv {
	t.Helper()
	s := &scriptServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, seenRequest{Key: r.Header.Get("Idempotency-Key"), Keys: len(r.Header.Values("Idempotency-Key")), Body: string(body)})
		n := len(s.seen)
		s.mu.Unlock()
		respond(n, w, r)
	}))
	t.Cleanup(s.Close)
	clock := newFakeTime()
	cfg := &idemclient.Config{
		HTTPClient: s.Client(),
		Now:        clock.Now,
		Sleep:      clock.Sleep,
		Logger:     discardLogger,
	}
	if edit != nil {
		edit(cfg)
	}
	c, err := idemclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{client: c, server: s, clock: clock}
}

func (e *testEnv) intent(t *testing.T, body string) *idemclient.Intent {
	t.Helper()
	in, err := e.client.NewIntent(http.MethodPost, e.server.URL+"/transfers", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	in.Header.Set("Content-Type", "application/json")
	return in
}

// respondStatus writes status with an optional Retry-After, then 201.
func statusThenCreated(status int, retryAfter string) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":1}`)
	}
}

// hijackClose drops the connection without an answer; with reset it sends a
// TCP RST (SO_LINGER 0) instead of a FIN.
func hijackClose(t testing.TB, w http.ResponseWriter, reset bool) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		tc.SetLinger(0)
	}
	conn.Close()
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

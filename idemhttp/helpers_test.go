package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// env is one middleware over a fresh memstore, with a log buffer and the
// events its observer saw.
type env struct {
	store *memstore.Store
	flaky *flakyStore
	guard *idem.Guard
	mw    *idemhttp.Middleware
	logs  *syncBuffer

	mu     sync.Mutex
	events []idem.Event
}

type setupOptions struct {
	cfg   *idemhttp.Config
	guard *idem.Config
	// level is the least level e.logs keeps; Debug unless set.
	level *slog.Level
}

func setup(t *testing.T, opts ...func(*setupOptions)) *env {
	t.Helper()
	var o setupOptions
	for _, f := range opts {
		f(&o)
	}
	e := &env{store: memstore.New(), logs: &syncBuffer{}}
	e.flaky = &flakyStore{Store: e.store}
	g, err := idem.New(e.flaky, o.guard)
	if err != nil {
		t.Fatal(err)
	}
	e.guard = g
	var cfg idemhttp.Config
	if o.cfg != nil {
		cfg = *o.cfg
	}
	level := slog.LevelDebug
	if o.level != nil {
		level = *o.level
	}
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: level}))
	cfg.Observer = idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.events = append(e.events, ev)
	})
	e.mw, err = idemhttp.New(g, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func withConfig(c idemhttp.Config) func(*setupOptions) {
	return func(o *setupOptions) { o.cfg = &c }
}

// atLevel keeps only the log lines at level or above in e.logs.
func atLevel(level slog.Level) func(*setupOptions) {
	return func(o *setupOptions) { o.level = &level }
}

func withGuardConfig(c idem.Config) func(*setupOptions) {
	return func(o *setupOptions) { o.guard = &c }
}

// outcomes returns the outcomes the observer saw, in order.
func (e *env) outcomes() []idem.Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []idem.Outcome
	for _, ev := range e.events {
		out = append(out, ev.Outcome)
	}
	return out
}

// record returns the stored record for (scope, key), or nil.
func (e *env) record(t *testing.T, scope, key string) *idem.Record {
	t.Helper()
	rec, err := e.store.Lookup(t.Context(), &idem.LookupParams{Scope: scope, Key: key})
	if errors.Is(err, idem.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// effectHandler is a handler whose effect goes through the memstore
// transaction: it counts its runs and sets effect/<n> in the transaction.
type effectHandler struct {
	runs   atomic.Int64
	status int
	body   string
	header http.Header
	// before runs first, inside the transaction.
	before func(w http.ResponseWriter, r *http.Request)
}

func (h *effectHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.runs.Add(1)
	if h.before != nil {
		h.before(w, r)
	}
	tx, ok := memstore.TxFrom(r.Context())
	if ok {
		tx.Set(fmt.Sprintf("effect/%d", n), "done")
	}
	for k, v := range h.header {
		w.Header()[k] = v
	}
	status := h.status
	if status == 0 {
		status = http.StatusCreated
	}
	w.WriteHeader(status)
	body := h.body
	if body == "" {
		reqBody, _ := io.ReadAll(r.Body)
		body = fmt.Sprintf(`{"run":%d,"echo":%q}`, n, reqBody)
	}
	io.WriteString(w, body)
}

type reqOpt func(*http.Request)

func header(name, value string) reqOpt {
	return func(r *http.Request) { r.Header.Add(name, value) }
}

// withBody replaces the request's body.
func withBody(body string) reqOpt {
	return func(r *http.Request) {
		r.Body = io.NopCloser(strings.NewReader(body))
		r.ContentLength = int64(len(body))
	}
}

func withKey(key string) reqOpt { return header("Idempotency-Key", key) }

// alice is the principal that serve's requests carry unless told otherwise,
// as if an authentication middleware had called WithPrincipal.
const alice = "user:alice"

// asPrincipal sets the request's principal; "" leaves it without one.
func asPrincipal(p string) reqOpt {
	return func(r *http.Request) { *r = *r.WithContext(idem.WithPrincipal(r.Context(), p)) }
}

// authed returns r with alice as its principal.
func authed(r *http.Request) *http.Request {
	return r.WithContext(idem.WithPrincipal(r.Context(), alice))
}

// bearerAuth is a test authentication middleware: Authorization: Bearer
// <name> makes user:<name> the principal; anything else is a 401.
func bearerAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || name == "" {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(idem.WithPrincipal(r.Context(), "user:"+name)))
	})
}

// serve sends one request to h, from alice unless an option says
// otherwise, and returns the recorded response.
func serve(h http.Handler, method, target, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	r := authed(httptest.NewRequest(method, target, strings.NewReader(body)))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// checkProblem asserts that w is a problem+json answer of the given type
// and status.
func checkProblem(t *testing.T, w *httptest.ResponseRecorder, typ string, status int) idemhttp.Problem {
	t.Helper()
	if got, want := w.Code, status; got != want {
		t.Errorf("status: got %d, want %d (body %s)", got, want, w.Body)
	}
	if got, want := w.Header().Get("Content-Type"), idemhttp.ProblemContentType; got != want {
		t.Errorf("Content-Type: got %q, want %q", got, want)
	}
	var p idemhttp.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	if got, want := p.Type, typ; got != want {
		t.Errorf("problem type: got %q, want %q", got, want)
	}
	if got, want := p.Status, status; got != want {
		t.Errorf("problem status: got %d, want %d", got, want)
	}
	if p.Title == "" {
		t.Errorf("problem title: got empty, want a title")
	}
	if w.Header().Get(idemhttp.ReplayedHeader) != "" {
		t.Errorf("%s set on a problem", idemhttp.ReplayedHeader)
	}
	return p
}

// flakyStore wraps a memstore and fails on demand like an unreachable
// database.
type flakyStore struct {
	*memstore.Store
	failBegin  atomic.Bool
	failCommit atomic.Bool
	// beforeBegin, when set before the first request, runs at the start
	// of every Begin.
	beforeBegin func(ctx context.Context)
}

var errConnRefused = errors.New("dial tcp 127.0.0.1:5432: connection refused")

func (s *flakyStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if s.beforeBegin != nil {
		s.beforeBegin(ctx)
	}
	if s.failBegin.Load() {
		return nil, nil, fmt.Errorf("%w: %w", idem.ErrUnavailable, errConnRefused)
	}
	rec, tx, err := s.Store.Begin(ctx, p)
	if tx != nil && s.failCommit.Load() {
		tx = failCommitTx{tx}
	}
	return rec, tx, err
}

type failCommitTx struct{ idem.Tx }

func (tx failCommitTx) Commit(ctx context.Context, p *idem.CommitParams) error {
	_ = tx.Tx.Rollback(ctx)
	return fmt.Errorf("%w: %w", idem.ErrUnavailable, errConnRefused)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// expiringCtx is a context that ends when the test says so: its deadline
// runs out when expire is called, its client leaves when cancel is. A test
// decides that way which step of a request sees it end.
type expiringCtx struct {
	context.Context
	once sync.Once
	done chan struct{}
	err  error
}

func newExpiringCtx() *expiringCtx {
	return &expiringCtx{Context: context.Background(), done: make(chan struct{})}
}

func (c *expiringCtx) expire() { c.end(context.DeadlineExceeded) }

func (c *expiringCtx) cancel() { c.end(context.Canceled) }

func (c *expiringCtx) end(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.done)
	})
}

func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

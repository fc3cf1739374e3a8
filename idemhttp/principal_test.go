package idemhttp_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/memstore"
)

// tokenAuth is an authentication middleware that knows its callers by the
// value of one header (Authorization, X-Auth-Token, ...) and hands the
// principal to idemhttp with WithPrincipal. A value it does not know is a
// 401; no header at all passes through without a principal.
func tokenAuth(header string, principals map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(header)
		if v == "" {
			next.ServeHTTP(w, r)
			return
		}
		p, ok := principals[v]
		if !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(idem.WithPrincipal(r.Context(), p)))
	})
}

// defaultMiddleware is idemhttp.New(guard, nil) over a fresh memstore, as
// the issue reproduced it (logs discarded).
func defaultMiddleware(t *testing.T) (*memstore.Store, *idemhttp.Middleware) {
	t.Helper()
	store := memstore.New()
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(g, &idemhttp.Config{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return store, mw
}

// send posts body with key through h, adding the given header.
func send(h http.Handler, key, body, name, value string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	if name != "" {
		r.Header.Set(name, value)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// K2: a refreshed token with a stable principal is the same
// caller. The same key and body sent first with "Bearer a", then with
// "Bearer b" (the refreshed token of the same user) is a replay; the
// handler runs once. Hashing the credentials ran it twice.
func TestTokenRefreshIsReplayed(t *testing.T) {
	t.Parallel()
	_, mw := defaultMiddleware(t)
	h := &effectHandler{}
	server := tokenAuth("Authorization", map[string]string{"Bearer a": "user:42", "Bearer b": "user:42"}, mw.Handler(h))

	first := send(server, "k-1", `{"amount":10}`, "Authorization", "Bearer a")
	retry := send(server, "k-1", `{"amount":10}`, "Authorization", "Bearer b")
	if got, want := first.Code, http.StatusCreated; got != want {
		t.Fatalf("first: got %d, want %d (%s)", got, want, first.Body)
	}
	if got, want := h.runs.Load(), int64(1); got != want {
		t.Errorf("handler runs: got %d, want %d", got, want)
	}
	if got, want := retry.Header().Get(idemhttp.ReplayedHeader), "true"; got != want {
		t.Errorf("retry with the refreshed token: %s %q, want %q", idemhttp.ReplayedHeader, got, want)
	}
	if got, want := retry.Body.String(), first.Body.String(); got != want {
		t.Errorf("retry body: got %s, want %s", got, want)
	}
}

// Two tenants authenticated by a header the middleware does not
// know (X-Auth-Token), with no principal handed over and no Scope
// configured, are refused with 500 no-principal: nothing runs, nothing is
// recorded, and tenant B never receives tenant A's response. Hashing the
// credentials put both in one shared scope and replayed A's 201 to B.
func TestUnknownAuthHeaderWithoutPrincipalIsRefused(t *testing.T) {
	t.Parallel()
	store, mw := defaultMiddleware(t)
	h := &effectHandler{}
	handler := mw.Handler(h)

	a := send(handler, "order-1001", `{"sku":"A1"}`, "X-Auth-Token", "tenantA")
	b := send(handler, "order-1001", `{"sku":"A1"}`, "X-Auth-Token", "tenantB")
	for name, w := range map[string]*httptest.ResponseRecorder{"tenant A": a, "tenant B": b} {
		p := checkProblem(t, w, idemhttp.ProblemNoPrincipal, http.StatusInternalServerError)
		if p.Detail == "" {
			t.Errorf("%s: problem without a detail", name)
		}
		if w.Header().Get(idemhttp.ReplayedHeader) != "" {
			t.Errorf("%s: got a replay", name)
		}
	}
	if got := h.runs.Load(); got != 0 {
		t.Errorf("handler runs: got %d, want 0", got)
	}
	for _, scope := range []string{"", idem.AnonymousScope} {
		if _, err := store.Lookup(t.Context(), &idem.LookupParams{Scope: scope, Key: "order-1001"}); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("record in scope %q: got %v, want none", scope, err)
		}
	}
}

// K2: the same two tenants, with an authentication layer that
// hands their principals over: two principals with one key are two
// executions, and neither is replayed the other's response.
func TestTwoPrincipalsOneKey(t *testing.T) {
	t.Parallel()
	store, mw := defaultMiddleware(t)
	h := &effectHandler{}
	server := tokenAuth("X-Auth-Token", map[string]string{"tenantA": "tenant:A", "tenantB": "tenant:B"}, mw.Handler(h))

	a := send(server, "order-1001", `{"sku":"A1"}`, "X-Auth-Token", "tenantA")
	b := send(server, "order-1001", `{"sku":"A1"}`, "X-Auth-Token", "tenantB")
	a2 := send(server, "order-1001", `{"sku":"A1"}`, "X-Auth-Token", "tenantA")
	b2 := send(server, "order-1001", `{"sku":"A1"}`, "X-Auth-Token", "tenantB")

	if got, want := h.runs.Load(), int64(2); got != want {
		t.Errorf("handler runs: got %d, want %d (one per principal)", got, want)
	}
	for name, w := range map[string]*httptest.ResponseRecorder{"A": a, "B": b} {
		if got, want := w.Code, http.StatusCreated; got != want {
			t.Errorf("tenant %s: got %d, want %d", name, got, want)
		}
		if got := w.Header().Get(idemhttp.ReplayedHeader); got != "" {
			t.Errorf("tenant %s's first request was replayed (%s)", name, w.Body)
		}
	}
	if a.Body.String() == b.Body.String() {
		t.Errorf("tenant B got tenant A's body %s", a.Body)
	}
	if a2.Body.String() != a.Body.String() || b2.Body.String() != b.Body.String() {
		t.Errorf("replays: A got %s (want %s), B got %s (want %s)", a2.Body, a.Body, b2.Body, b.Body)
	}
	for _, scope := range []string{"tenant:A", "tenant:B"} {
		if _, err := store.Lookup(t.Context(), &idem.LookupParams{Scope: scope, Key: "order-1001"}); err != nil {
			t.Errorf("record in scope %s: %v", scope, err)
		}
	}
}

// Anonymous callers share AnonymousScope only where the operator
// says so, for the whole middleware (Config.Anonymous) or per route
// (RouteOptions.Anonymous); the same middleware's other routes still
// refuse them.
func TestExplicitAnonymousIsShared(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   idemhttp.Config
		route idemhttp.RouteOptions
	}{
		{"Middleware", idemhttp.Config{Anonymous: true}, idemhttp.RouteOptions{}},
		{"Route", idemhttp.Config{}, idemhttp.RouteOptions{Anonymous: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, withConfig(tc.cfg))
			h := &effectHandler{}
			public := e.mw.Route(tc.route)(h)

			first := serve(public, "POST", "/signups", `{"email":"a@example.com"}`, withKey("k"), asPrincipal(""))
			second := serve(public, "POST", "/signups", `{"email":"a@example.com"}`, withKey("k"), asPrincipal(""))
			if got, want := h.runs.Load(), int64(1); got != want {
				t.Errorf("handler runs: got %d, want %d", got, want)
			}
			if got, want := second.Header().Get(idemhttp.ReplayedHeader), "true"; got != want {
				t.Errorf("second anonymous request: %s %q, want %q (one shared scope)", idemhttp.ReplayedHeader, got, want)
			}
			if got, want := second.Body.String(), first.Body.String(); got != want {
				t.Errorf("second body: got %s, want %s", got, want)
			}
			if e.record(t, idem.AnonymousScope, "k") == nil {
				t.Errorf("record in %q: none", idem.AnonymousScope)
			}
			// A caller with a principal keeps its own scope.
			own := serve(public, "POST", "/signups", `{"email":"a@example.com"}`, withKey("k"))
			if own.Header().Get(idemhttp.ReplayedHeader) != "" {
				t.Errorf("a principal received the anonymous callers' response")
			}
			if got, want := h.runs.Load(), int64(2); got != want {
				t.Errorf("handler runs: got %d, want %d", got, want)
			}

			private := e.mw.Handler(h)
			w := serve(private, "POST", "/orders", `{}`, withKey("k2"), asPrincipal(""))
			if tc.cfg.Anonymous {
				if got, want := w.Code, http.StatusCreated; got != want {
					t.Errorf("other route of an anonymous middleware: got %d, want %d", got, want)
				}
			} else {
				checkProblem(t, w, idemhttp.ProblemNoPrincipal, http.StatusInternalServerError)
			}
		})
	}
}

// A Config.Scope that reports ErrNoPrincipal (or returns an empty scope)
// is treated like a request without a principal: refused, or anonymous
// where allowed. Any other error is still a 500 internal.
func TestScopeFunctionWithoutPrincipal(t *testing.T) {
	t.Parallel()
	scope := func(r *http.Request) (string, error) {
		switch r.Header.Get("X-Tenant") {
		case "":
			return "", errors.New("tenant lookup: no such table")
		case "none":
			return "", idem.ErrNoPrincipal
		case "empty":
			return "", nil
		}
		return "tenant:" + r.Header.Get("X-Tenant"), nil
	}
	e := setup(t, withConfig(idemhttp.Config{Scope: scope}))
	h := &effectHandler{}
	handler := e.mw.Handler(h)
	anonymous := e.mw.Route(idemhttp.RouteOptions{Anonymous: true})(h)

	checkProblem(t, serve(handler, "POST", "/x", "{}", withKey("k"), header("X-Tenant", "none")), idemhttp.ProblemNoPrincipal, http.StatusInternalServerError)
	checkProblem(t, serve(handler, "POST", "/x", "{}", withKey("k"), header("X-Tenant", "empty")), idemhttp.ProblemNoPrincipal, http.StatusInternalServerError)
	checkProblem(t, serve(handler, "POST", "/x", "{}", withKey("k")), idemhttp.ProblemInternal, http.StatusInternalServerError)
	checkProblem(t, serve(anonymous, "POST", "/x", "{}", withKey("k")), idemhttp.ProblemInternal, http.StatusInternalServerError)
	if got := h.runs.Load(); got != 0 {
		t.Errorf("handler runs: got %d, want 0", got)
	}
	if e.record(t, "", "k") != nil {
		t.Errorf("a record in the empty scope")
	}
	for _, v := range []string{"none", "empty"} {
		if got, want := serve(anonymous, "POST", "/x", "{}", withKey("k"), header("X-Tenant", v)).Code, http.StatusCreated; got != want {
			t.Errorf("X-Tenant %s on an anonymous route: got %d, want %d", v, got, want)
		}
	}
	if e.record(t, idem.AnonymousScope, "k") == nil {
		t.Errorf("record in %q: none", idem.AnonymousScope)
	}
	want := []idem.Outcome{idem.OutcomeNoPrincipal, idem.OutcomeNoPrincipal, idem.OutcomeError, idem.OutcomeError,
		idem.OutcomeExecuted, idem.OutcomeReplayed}
	if got := e.outcomes(); !slices.Equal(got, want) {
		t.Errorf("outcomes: got %v, want %v", got, want)
	}
}

// The refusal logs one ERROR line per Middleware that says how to give
// requests a principal, and one outcome line per request.
func TestNoPrincipalLogsHowToConfigureOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for range 3 {
		serve(e.mw.Handler(&effectHandler{}), "POST", "/x", "{}", withKey("k"), asPrincipal(""))
	}
	logs := e.logs.String()
	if got, want := strings.Count(logs, "level=ERROR"), 1; got != want {
		t.Errorf("ERROR lines: got %d, want %d:\n%s", got, want, logs)
	}
	for _, hint := range []string{"idem.WithPrincipal", "Config.Scope", "Config.Anonymous", "RouteOptions.Anonymous"} {
		if !strings.Contains(logs, hint) {
			t.Errorf("log does not name %s:\n%s", hint, logs)
		}
	}
	if got, want := strings.Count(logs, "outcome=no_principal"), 3; got != want {
		t.Errorf("no_principal outcome lines: got %d, want %d:\n%s", got, want, logs)
	}

	// Another middleware says it again, once.
	var buf syncBuffer
	g, _ := idem.New(memstore.New(), nil)
	mw, err := idemhttp.New(g, &idemhttp.Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	serve(mw.Handler(&effectHandler{}), "POST", "/x", "{}", withKey("k"), asPrincipal(""))
	serve(mw.Handler(&effectHandler{}), "POST", "/x", "{}", withKey("k"), asPrincipal(""))
	if got, want := strings.Count(buf.String(), "idem.WithPrincipal"), 1; got != want {
		t.Errorf("second middleware's hint lines: got %d, want %d:\n%s", got, want, buf.String())
	}
}

// Config.Scope receives the request with its body readable, so a
// scope can come from the body; the handler still gets the whole body.
func TestScopeSeesBody(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{Scope: func(r *http.Request) (string, error) {
		var in struct{ Account string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return "", err
		}
		if in.Account == "" {
			return "", idem.ErrNoPrincipal
		}
		return "account:" + in.Account, nil
	}}))
	var got string
	handler := e.mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
		w.WriteHeader(http.StatusCreated)
	}))
	const body = `{"account":"acc-7","amount":10}`
	w := serve(handler, "POST", "/x", body, withKey("k"))
	if w.Code != http.StatusCreated {
		t.Fatalf("status: got %d, want 201 (%s)", w.Code, w.Body)
	}
	if got != body {
		t.Errorf("body seen by the handler: got %q, want %q", got, body)
	}
	if e.record(t, "account:acc-7", "k") == nil {
		t.Errorf("record in scope account:acc-7: none")
	}
}

package idemecho_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemecho"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/memstore"
	"github.com/labstack/echo/v4"
)

type env struct {
	t       *testing.T
	url     string
	handler http.Handler // the router, for the in-process audit
	store   *memstore.Store
	after   atomic.Int64 // runs of the handler that reached its effect
}

// setup serves an echo instance on 127.0.0.1: authentication from a Bearer
// token, then POST /transfers behind idemecho.Middleware. The handler adds
// one to the counter "n" in the store's transaction; a body {"fail":N}
// answers N instead.
func setup(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, store: memstore.New()}
	guard, err := idem.New(e.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.New(guard, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r := echo.New()
	r.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if token, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer "); ok {
				idemecho.SetPrincipal(c, "user:"+token)
			}
			return next(c)
		}
	})
	r.POST("/transfers", func(c echo.Context) error {
		var in struct{ Fail int }
		if err := c.Bind(&in); err != nil {
			return err
		}
		tx, ok := memstore.TxFrom(c.Request().Context())
		if !ok {
			return echo.NewHTTPError(http.StatusInternalServerError, "no transaction")
		}
		v, _ := tx.Get("n")
		n, _ := strconv.Atoi(v)
		tx.Set("n", strconv.Itoa(n+1))
		e.after.Add(1)
		switch {
		case in.Fail == http.StatusConflict:
			// A returned error is rendered inside the middleware, so a
			// 4xx HTTPError is recorded like a written answer.
			return echo.NewHTTPError(in.Fail, "failed")
		case in.Fail == http.StatusInternalServerError:
			return errors.New("a plain error: echo renders it 500")
		case in.Fail != 0:
			return c.JSON(in.Fail, map[string]string{"error": "failed"})
		}
		c.Response().Header().Set("Location", "/transfers/"+strconv.Itoa(n+1))
		return c.JSON(http.StatusCreated, map[string]int{"n": n + 1})
	}, idemecho.Middleware(mw))
	e.handler = r
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (e *env) post(key, body string) answer {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, e.url+"/transfers", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer ann")
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func (e *env) effects() int {
	v, _ := e.store.Value("n")
	n, _ := strconv.Atoi(v)
	return n
}

// Through echo's router: one effect per key, the first answer replayed
// byte for byte with Idempotent-Replayed, the rest of the chain skipped
// when idemhttp answers itself.
func TestReplay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	first := e.post("k1", `{}`)
	if first.status != http.StatusCreated || first.header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("first: %+v", first)
	}
	again := e.post("k1", `{ }`) // same canonical JSON
	if again.status != first.status || again.body != first.body || again.header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("retry: %+v, want the replay of %+v", again, first)
	}
	if again.header.Get("Location") != first.header.Get("Location") || again.header.Get("Content-Type") != first.header.Get("Content-Type") {
		t.Fatalf("replayed headers %v", again.header)
	}
	if got := e.effects(); got != 1 {
		t.Fatalf("effects = %d, want 1", got)
	}
	if got := e.after.Load(); got != 1 {
		t.Fatalf("the handler ran %d times, want 1 (not on the replay)", got)
	}
}

// The whole contract holds through echo's router: the audit idem check runs
// (retry, concurrent duplicates, another body, reordered JSON, missing and
// malformed keys, another principal, no key), in process through idemtest,
// passes every rule, counted by the effect in the store's transaction. What
// is left below is the adapter's own: the chain after the middleware, and
// how the framework's writer and errors reach idemhttp.
func TestAudit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rep := idemtest.Check(t, e.handler, idemtest.Endpoint{
		Path:       "/transfers",
		Body:       `{"amount":5}`,
		Header:     http.Header{"Authorization": {"Bearer ann"}, "Content-Type": {"application/json"}},
		Principal2: http.Header{"Authorization": {"Bearer bob"}},
		Effects:    func() (int, error) { return e.effects(), nil },
	})
	if rep.Error != "" || len(rep.Results) == 0 {
		t.Fatalf("the audit did not run: %q", rep.Error)
	}
	for _, r := range rep.Results {
		if r.Status != idemtest.Pass {
			t.Errorf("rule %d (%s): %s, want PASS: %v", r.Rule, r.Name, r.Status, r.Evidence)
		}
	}
}

// A 5xx from the echo handler rolls its effect back and is not recorded;
// a 4xx returned as an *echo.HTTPError is recorded with it and replayed.
func TestFinalAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if got := e.post("k1", `{"fail":503}`); got.status != http.StatusServiceUnavailable {
		t.Fatalf("5xx: %+v", got)
	}
	if got := e.post("k1", `{"fail":500}`); got.status != http.StatusInternalServerError {
		t.Fatalf("returned error: %+v", got)
	}
	if got := e.effects(); got != 0 {
		t.Fatalf("effects after a 5xx = %d, want 0", got)
	}
	if got := e.post("k2", `{"fail":409}`); got.status != http.StatusConflict {
		t.Fatalf("4xx: %+v", got)
	}
	got := e.post("k2", `{"fail":409}`)
	var body map[string]string
	json.Unmarshal([]byte(got.body), &body)
	if got.status != http.StatusConflict || got.header.Get(idemhttp.ReplayedHeader) != "true" || body["message"] != "failed" {
		t.Fatalf("4xx retry: %+v, want the recorded 409 replayed", got)
	}
	if got := e.effects(); got != 1 {
		t.Fatalf("effects = %d, want 1 (the 4xx's)", got)
	}
}

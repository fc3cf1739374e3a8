package idemgin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgin"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/memstore"
)

func init() { gin.SetMode(gin.ReleaseMode) }

type env struct {
	t       *testing.T
	url     string
	handler http.Handler // the router, for the in-process audit
	store   *memstore.Store
	after   atomic.Int64 // runs of a handler placed after the protected one
}

// setup serves a gin engine on 127.0.0.1: authentication from a Bearer
// token, then POST /transfers behind idemgin.Middleware. The handler adds
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
	r := gin.New()
	r.Use(func(c *gin.Context) {
		if token, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); ok {
			idemgin.SetPrincipal(c, "user:"+token)
		}
	})
	r.POST("/transfers", idemgin.Middleware(mw), func(c *gin.Context) {
		var in struct{ Fail int }
		if err := c.ShouldBindJSON(&in); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		tx, ok := memstore.TxFrom(c.Request.Context())
		if !ok {
			c.JSON(http.StatusInternalServerError, gin.H{"error": "no transaction"})
			return
		}
		v, _ := tx.Get("n")
		n, _ := strconv.Atoi(v)
		tx.Set("n", strconv.Itoa(n+1))
		if in.Fail != 0 {
			c.JSON(in.Fail, gin.H{"error": "failed"})
			return
		}
		c.Header("Location", "/transfers/"+strconv.Itoa(n+1))
		c.JSON(http.StatusCreated, gin.H{"n": n + 1})
	}, func(*gin.Context) { e.after.Add(1) })
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

// Through gin's router: one effect per key, the first answer replayed
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
		t.Fatalf("the handler after ran %d times, want 1 (not on the replay)", got)
	}
}

// The whole contract holds through gin's router: the audit idem check runs
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

// A 5xx from the gin handler rolls its effect back and is not recorded; a
// 4xx is recorded with it and replayed.
func TestFinalAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if got := e.post("k1", `{"fail":503}`); got.status != http.StatusServiceUnavailable {
		t.Fatalf("5xx: %+v", got)
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
	if got.status != http.StatusConflict || got.header.Get(idemhttp.ReplayedHeader) != "true" || body["error"] != "failed" {
		t.Fatalf("4xx retry: %+v, want the recorded 409 replayed", got)
	}
	if got := e.effects(); got != 1 {
		t.Fatalf("effects = %d, want 1 (the 4xx's)", got)
	}
}

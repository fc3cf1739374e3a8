package console

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

const token = "the-console-token-0123"

type fakeOps struct{ forgets, resolves []Action }

func (f *fakeOps) Summary(context.Context) (*Summary, error) {
	return &Summary{Now: time.Now(), Completed: 3, Stuck: 1, Counted: 4,
		Pending: []Record{{Scope: "anonymous", Key: "p<1>", State: "pending", Stuck: true, Token: 9,
			Steps: []Step{{Name: "debit", Output: "42"}}, LastError: "provider: 502"}}}, nil
}

func (f *fakeOps) Forget(_ context.Context, a Action) error {
	f.forgets = append(f.forgets, a)
	return nil
}

func (f *fakeOps) Resolve(_ context.Context, a Action) error {
	f.resolves = append(f.resolves, a)
	return nil
}

func setup(t *testing.T) (*httptest.Server, *fakeOps, *bytes.Buffer) {
	t.Helper()
	ops := &fakeOps{}
	var logs bytes.Buffer
	h, err := New(Config{Token: token, Ops: ops, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, ops, &logs
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func send(t *testing.T, method, u string, form url.Values, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestEveryRequestNeedsTheToken(t *testing.T) {
	srv, ops, logs := setup(t)
	res, body := send(t, "GET", srv.URL+"/", nil, nil)
	if res.StatusCode != 401 || !strings.Contains(body, `name="token"`) || strings.Contains(body, "anonymous") {
		t.Errorf("GET / without a token: %d, want 401 and the login form only\n%s", res.StatusCode, body)
	}
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, {"Cookie": cookieName + "=" + token}} {
		if res, _ := send(t, "POST", srv.URL+"/forget", url.Values{"scope": {"s"}, "key": {"k"}, "actor": {"a"}, "reason": {"r"}}, hdr); res.StatusCode != 401 {
			t.Errorf("POST /forget with %v: %d, want 401", hdr, res.StatusCode)
		}
	}
	if len(ops.forgets) != 0 {
		t.Errorf("unauthorized requests changed records: %v", ops.forgets)
	}
	res, body = send(t, "GET", srv.URL+"/", nil, map[string]string{"Authorization": "Bearer " + token})
	if res.StatusCode != 200 || !strings.Contains(body, "p&lt;1&gt;") || !strings.Contains(body, "debit") {
		t.Errorf("GET / with the token: %d\n%s", res.StatusCode, body)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if strings.Contains(logs.String(), token) {
		t.Error("the token was logged")
	}
}

func TestLoginSetsAStrictHttpOnlyCookie(t *testing.T) {
	srv, _, _ := setup(t)
	res, _ := send(t, "POST", srv.URL+"/login", url.Values{"token": {"wrong"}}, nil)
	if res.StatusCode != 303 || len(res.Cookies()) != 0 || !strings.Contains(res.Header.Get("Location"), "failed") {
		t.Errorf("login with a wrong token: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	res, _ = send(t, "POST", srv.URL+"/login", url.Values{"token": {token}}, nil)
	cs := res.Cookies()
	if res.StatusCode != 303 || len(cs) != 1 {
		t.Fatalf("login: %d, cookies %v", res.StatusCode, cs)
	}
	c := cs[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Value == token || strings.Contains(c.Value, token) {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, not the token", c)
	}
	if res, _ := send(t, "GET", srv.URL+"/", nil, map[string]string{"Cookie": c.Name + "=" + c.Value}); res.StatusCode != 200 {
		t.Errorf("GET / with the session cookie: %d", res.StatusCode)
	}
}

func TestStateChangesNeedTheCSRFToken(t *testing.T) {
	srv, ops, _ := setup(t)
	auth := map[string]string{"Authorization": "Bearer " + token}
	form := url.Values{"scope": {"anonymous"}, "key": {"p1"}, "token": {"9"}, "actor": {"carol"}, "reason": {"reconciled"}, "status": {"201"}, "body": {"{}"}}
	for _, csrf := range []string{"", "wrong"} {
		f := url.Values{"csrf": {csrf}}
		for k, v := range form {
			f[k] = v
		}
		if res, _ := send(t, "POST", srv.URL+"/resolve", f, auth); res.StatusCode != 403 {
			t.Errorf("POST /resolve with CSRF %q: %d, want 403", csrf, res.StatusCode)
		}
	}
	if len(ops.resolves) != 0 {
		t.Fatalf("resolves without the CSRF token: %v", ops.resolves)
	}
	_, page := send(t, "GET", srv.URL+"/", nil, auth)
	i := strings.Index(page, `name="csrf" value="`)
	if i < 0 {
		t.Fatal("no CSRF field on the page")
	}
	csrf := page[i+len(`name="csrf" value="`):]
	csrf = csrf[:strings.IndexByte(csrf, '"')]
	form.Set("csrf", csrf)
	res, _ := send(t, "POST", srv.URL+"/resolve", form, auth)
	if res.StatusCode != 303 || len(ops.resolves) != 1 {
		t.Fatalf("POST /resolve with the CSRF token: %d, %v", res.StatusCode, ops.resolves)
	}
	if a := ops.resolves[0]; a.Scope != "anonymous" || a.Key != "p1" || a.Token != 9 || a.Status != 201 || a.Actor != "carol" || a.Reason != "reconciled" {
		t.Errorf("resolve = %+v", a)
	}
	form.Del("reason")
	res, _ = send(t, "POST", srv.URL+"/forget", form, auth)
	if loc := res.Header.Get("Location"); len(ops.forgets) != 0 || !strings.Contains(loc, "reason") {
		t.Errorf("a forget without a reason ran (%v) or was not refused (%s)", ops.forgets, loc)
	}
}

package idemhttp_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// E5: the same key with a different request is a 422; the handler does not
// run and nothing is replayed. JSON member order and whitespace do not make
// a request different.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	type req struct {
		method, target, body, contentType string
		header                            []string // name, value pairs
	}
	first := req{"POST", "/transfers?b=2&a=1", `{"amount":10,"to":"bob"}`, "application/json", []string{"X-Tenant", "t1"}}
	tests := []struct {
		name   string
		retry  req
		replay bool
	}{
		{"Identical", first, true},
		{"JSONReordered", req{"POST", "/transfers?b=2&a=1", "{ \"to\" : \"bob\",\n \"amount\": 10 }", "application/json", []string{"X-Tenant", "t1"}}, true},
		{"JSONWithCharset", req{"POST", "/transfers?b=2&a=1", `{"to":"bob","amount":10}`, "application/json; charset=utf-8", []string{"X-Tenant", "t1"}}, true},
		{"PlusJSON", req{"POST", "/transfers?b=2&a=1", `{"to":"bob","amount":10}`, "application/merge-patch+json", []string{"X-Tenant", "t1"}}, true},
		{"QueryReordered", req{"POST", "/transfers?a=1&b=2", first.body, "application/json", []string{"X-Tenant", "t1"}}, true},
		{"OtherAmount", req{"POST", "/transfers?b=2&a=1", `{"amount":11,"to":"bob"}`, "application/json", []string{"X-Tenant", "t1"}}, false},
		{"NumberSpelling", req{"POST", "/transfers?b=2&a=1", `{"amount":10.0,"to":"bob"}`, "application/json", []string{"X-Tenant", "t1"}}, false},
		{"ReorderedNotJSON", req{"POST", "/transfers?b=2&a=1", `{"to":"bob","amount":10}`, "text/plain", []string{"X-Tenant", "t1"}}, false},
		{"OtherMethod", req{"PATCH", "/transfers?b=2&a=1", first.body, "application/json", []string{"X-Tenant", "t1"}}, false},
		{"OtherPath", req{"POST", "/payments?b=2&a=1", first.body, "application/json", []string{"X-Tenant", "t1"}}, false},
		{"OtherQuery", req{"POST", "/transfers?b=2&a=2", first.body, "application/json", []string{"X-Tenant", "t1"}}, false},
		{"OtherFingerprintHeader", req{"POST", "/transfers?b=2&a=1", first.body, "application/json", []string{"X-Tenant", "t2"}}, false},
		{"NoFingerprintHeader", req{"POST", "/transfers?b=2&a=1", first.body, "application/json", nil}, false},
		{"OtherUnlistedHeader", req{"POST", "/transfers?b=2&a=1", first.body, "application/json", []string{"X-Tenant", "t1", "X-Other", "1"}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, withConfig(idemhttp.Config{FingerprintHeaders: []string{"x-tenant"}}))
			h := &effectHandler{}
			handler := e.mw.Handler(h)
			send := func(q req) *httpResponse {
				opts := []reqOpt{withKey("k"), header("Content-Type", q.contentType)}
				for i := 0; i+1 < len(q.header); i += 2 {
					opts = append(opts, header(q.header[i], q.header[i+1]))
				}
				w := serve(handler, q.method, q.target, "", append([]reqOpt{withBody(q.body)}, opts...)...)
				return &httpResponse{w.Code, w.Body.String(), w.Header().Get(idemhttp.ReplayedHeader)}
			}
			orig := send(first)
			got := send(tc.retry)
			if got, want := h.runs.Load(), int64(1); got != want {
				t.Errorf("handler runs: got %d, want %d", got, want)
			}
			if tc.replay {
				if got.status != orig.status || got.body != orig.body || got.replayed != "true" {
					t.Errorf("retry: got %+v, want a replay of %+v", got, orig)
				}
				return
			}
			if got, want := got.status, http.StatusUnprocessableEntity; got != want {
				t.Errorf("status: got %d, want %d", got, want)
			}
			if got.replayed != "" {
				t.Errorf("%s on a mismatch: got %q, want none", idemhttp.ReplayedHeader, got.replayed)
			}
		})
	}
}

// Config.JSONBodies canonicalises JSON bodies whatever their Content-Type,
// and still compares a body that is not JSON byte for byte.
func TestJSONBodies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, first, retry, contentType string
		replay                          bool
	}{
		{"ReorderedAsText", `{"amount":10,"to":"bob"}`, `{ "to": "bob", "amount": 10 }`, "text/plain", true},
		{"ReorderedNoContentType", `{"amount":10,"to":"bob"}`, `{"to":"bob","amount":10}`, "", true},
		{"OtherAmountAsText", `{"amount":10,"to":"bob"}`, `{"amount":11,"to":"bob"}`, "text/plain", false},
		{"NotJSON", `amount=10&to=bob`, `to=bob&amount=10`, "application/x-www-form-urlencoded", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, withConfig(idemhttp.Config{JSONBodies: true}))
			h := &effectHandler{}
			handler := e.mw.Handler(h)
			send := func(body string) *httpResponse {
				w := serve(handler, "POST", "/transfers", "", withBody(body), withKey("k"), header("Content-Type", tc.contentType))
				return &httpResponse{w.Code, w.Body.String(), w.Header().Get(idemhttp.ReplayedHeader)}
			}
			orig := send(tc.first)
			got := send(tc.retry)
			if runs := h.runs.Load(); runs != 1 {
				t.Errorf("handler runs: got %d, want 1", runs)
			}
			if tc.replay != (got.replayed == "true" && got.status == orig.status && got.body == orig.body) {
				t.Errorf("retry: got %+v after %+v, want replay=%v", got, orig, tc.replay)
			}
			if !tc.replay && got.status != http.StatusUnprocessableEntity {
				t.Errorf("status: got %d, want 422", got.status)
			}
		})
	}
}

type httpResponse struct {
	status   int
	body     string
	replayed string
}

// The 422 is problem+json with its own type.
func TestMismatchProblem(t *testing.T) {
	t.Parallel()
	e := setup(t)
	handler := e.mw.Handler(&effectHandler{})
	serve(handler, "POST", "/x", `{"a":1}`, withKey("k"))
	checkProblem(t, serve(handler, "POST", "/x", `{"a":2}`, withKey("k")), idemhttp.ProblemMismatch, http.StatusUnprocessableEntity)
	if got, want := e.outcomes()[1], idem.OutcomeMismatch; got != want {
		t.Errorf("outcome: got %q, want %q", got, want)
	}
}

// The route is the ServeMux pattern when there is one, but two requests that
// match one pattern with different path values are still different.
func TestServeMuxPattern(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var pathValue string
	mux := http.NewServeMux()
	mux.Handle("POST /accounts/{id}/close", e.mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pathValue = r.PathValue("id")
		w.WriteHeader(http.StatusOK)
	})))
	if got, want := serve(mux, "POST", "/accounts/1/close", "", withKey("k")).Code, http.StatusOK; got != want {
		t.Fatalf("status: got %d, want %d", got, want)
	}
	if got, want := pathValue, "1"; got != want {
		t.Errorf("PathValue in the handler: got %q, want %q", got, want)
	}
	if got, want := serve(mux, "POST", "/accounts/2/close", "", withKey("k")).Code, http.StatusUnprocessableEntity; got != want {
		t.Errorf("same key, other account: got %d, want %d", got, want)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if got, want := e.events[0].Route, "POST /accounts/{id}/close"; got != want {
		t.Errorf("route: got %q, want %q", got, want)
	}
}

// Config.Route replaces the route; the same key on two paths that it maps
// to one route is still a mismatch, because the target always counts.
func TestCustomRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{Route: func(*http.Request) string { return "transfers" }}))
	handler := e.mw.Handler(&effectHandler{})
	serve(handler, "POST", "/a", "", withKey("k"))
	if got, want := serve(handler, "POST", "/b", "", withKey("k")).Code, http.StatusUnprocessableEntity; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if got, want := e.events[0].Route, "transfers"; got != want {
		t.Errorf("route: got %q, want %q", got, want)
	}
}

// A fingerprint header sent as one line "a, b" and as two lines
// "a" and "b" reads differently to a handler that calls Header.Get, so the
// two requests must never fingerprint alike: the retry is refused with 422,
// never answered with the other request's response.
func TestFingerprintHeaderLinesAreKeptApart(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{FingerprintHeaders: []string{"X-Debit-Account"}}))
	h := &effectHandler{}
	handler := e.mw.Handler(h)
	oneLine := serve(handler, "POST", "/transfers", `{"amount":1}`, withKey("k"), header("X-Debit-Account", "acct-1, acct-2"))
	if oneLine.Code != http.StatusCreated {
		t.Fatalf("first: status %d", oneLine.Code)
	}
	twoLines := serve(handler, "POST", "/transfers", `{"amount":1}`, withKey("k"),
		header("X-Debit-Account", "acct-1"), header("X-Debit-Account", "acct-2"))
	checkProblem(t, twoLines, idemhttp.ProblemMismatch, http.StatusUnprocessableEntity)
	same := serve(handler, "POST", "/transfers", `{"amount":1}`, withKey("k"), header("X-Debit-Account", "acct-1, acct-2"))
	if same.Code != http.StatusCreated || same.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Errorf("retry with the same line: status %d, replayed %q; want the replay", same.Code, same.Header().Get(idemhttp.ReplayedHeader))
	}
	if got := h.runs.Load(); got != 1 {
		t.Errorf("handler runs: got %d, want 1", got)
	}
}

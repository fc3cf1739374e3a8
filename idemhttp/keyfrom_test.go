package idemhttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idem/idemhttp"
)

// KeyFrom.JSON: the key in a body member is scoped, fingerprinted and
// replayed as a header's is; the header and the member may agree, never
// differ; a body without the member has no key.
func TestKeyFromJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	route := e.mw.Route(idemhttp.RouteOptions{KeyFrom: idemhttp.KeySource{JSON: "/pay/ref~1id"}})(h)
	body := `{"pay":{"ref/id":"order-7","amount":5}}`

	first := serve(route, "POST", "/pay", body)
	if first.Code != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	// The same member, in another member order: a replay, as the key is
	// the member's and the body is compared canonically.
	again := serve(route, "POST", "/pay", `{"pay":{"amount":5,"ref/id":"order-7"}}`)
	if again.Code != http.StatusCreated || again.Header().Get(idemhttp.ReplayedHeader) != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("retry: %d replayed=%q %s", again.Code, again.Header().Get(idemhttp.ReplayedHeader), again.Body)
	}
	// The header with the same key: the same request.
	if w := serve(route, "POST", "/pay", body, withKey("order-7")); w.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("header and member alike: %d %s", w.Code, w.Body)
	}
	// The same key with another amount: 422, as with a header.
	checkProblem(t, serve(route, "POST", "/pay", `{"pay":{"ref/id":"order-7","amount":6}}`), idemhttp.ProblemMismatch, http.StatusUnprocessableEntity)
	// Header and member differ.
	checkProblem(t, serve(route, "POST", "/pay", body, withKey("other")), idemhttp.ProblemConflictingKeys, http.StatusBadRequest)
	// Only the header: it is the key.
	if w := serve(route, "POST", "/pay", `{"pay":{"amount":1}}`, withKey("hdr-1")); w.Code != http.StatusCreated {
		t.Fatalf("header only: %d %s", w.Code, w.Body)
	}
	// A number is its literal text.
	if w := serve(route, "POST", "/pay", `{"pay":{"ref/id":12345}}`); w.Code != http.StatusCreated {
		t.Fatalf("number key: %d %s", w.Code, w.Body)
	}
	if rec := e.record(t, alice, "12345"); rec == nil {
		t.Fatal("no record under the number's text")
	}
	for name, b := range map[string]string{
		"NotJSON":     `pay=1`,
		"NoMember":    `{"pay":{}}`,
		"Null":        `{"pay":{"ref/id":null}}`,
		"NotAnObject": `{"pay":[1]}`,
		"Empty":       ``,
	} {
		t.Run(name, func(t *testing.T) {
			checkProblem(t, serve(route, "POST", "/pay", b), idemhttp.ProblemMissingKey, http.StatusBadRequest)
		})
	}
	for name, b := range map[string]string{
		"Object":   `{"pay":{"ref/id":{}}}`,
		"Bool":     `{"pay":{"ref/id":true}}`,
		"EmptyStr": `{"pay":{"ref/id":""}}`,
		"Space":    `{"pay":{"ref/id":"a b"}}`,
		"TooLong":  `{"pay":{"ref/id":"` + strings.Repeat("k", 256) + `"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := checkProblem(t, serve(route, "POST", "/pay", b), idemhttp.ProblemInvalidKey, http.StatusBadRequest)
			if !strings.Contains(p.Detail, "/pay/ref~1id") {
				t.Errorf("detail %q does not name the member", p.Detail)
			}
		})
	}
	if n := h.runs.Load(); n != 3 {
		t.Fatalf("handler runs = %d, want 3", n)
	}
}

// KeyFrom.JSON on an Optional route: a body without the member runs the
// handler unprotected, with the whole body.
func TestKeyFromJSONOptional(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	route := e.mw.Route(idemhttp.RouteOptions{Optional: true, KeyFrom: idemhttp.KeySource{JSON: "/id"}})(h)
	for range 2 {
		w := serve(route, "POST", "/x", `{"other":1}`)
		if w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `other`) {
			t.Fatalf("unprotected: %d %s", w.Code, w.Body)
		}
	}
	if n := h.runs.Load(); n != 2 {
		t.Fatalf("runs = %d, want 2 (unprotected)", n)
	}
}

// KeyFrom.Header: another header carries the key, in the same syntax.
func TestKeyFromHeader(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	route := e.mw.Route(idemhttp.RouteOptions{KeyFrom: idemhttp.KeySource{Header: "x-request-id"}})(h)
	if w := serve(route, "POST", "/x", `{}`, header("X-Request-Id", `"r-1"`)); w.Code != http.StatusCreated {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	if w := serve(route, "POST", "/x", `{}`, header("X-Request-Id", "r-1"), withKey("r-1")); w.Header().Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("both alike: %d %s", w.Code, w.Body)
	}
	checkProblem(t, serve(route, "POST", "/x", `{}`, header("X-Request-Id", "r-1"), withKey("r-2")), idemhttp.ProblemConflictingKeys, http.StatusBadRequest)
	checkProblem(t, serve(route, "POST", "/x", `{}`, header("X-Request-Id", "a b")), idemhttp.ProblemInvalidKey, http.StatusBadRequest)
	p := checkProblem(t, serve(route, "POST", "/x", `{}`), idemhttp.ProblemMissingKey, http.StatusBadRequest)
	if !strings.Contains(p.Detail, "X-Request-Id") {
		t.Errorf("detail %q does not name the header", p.Detail)
	}
	if n := h.runs.Load(); n != 1 {
		t.Fatalf("runs = %d, want 1", n)
	}
}

func TestKeyFromIsCheckedAtConstruction(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for name, o := range map[string]idemhttp.RouteOptions{
		"Both":          {KeyFrom: idemhttp.KeySource{Header: "X-Id", JSON: "/id"}},
		"NoSlash":       {KeyFrom: idemhttp.KeySource{JSON: "id"}},
		"BadEscape":     {KeyFrom: idemhttp.KeySource{JSON: "/a~2"}},
		"TrailingTilde": {KeyFrom: idemhttp.KeySource{JSON: "/a~"}},
		"BadHeader":     {KeyFrom: idemhttp.KeySource{Header: "X Id"}},
		"SameHeader":    {KeyFrom: idemhttp.KeySource{Header: "idempotency-key"}},
		"NegativeWait":  {Wait: -1},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Route did not panic")
				}
			}()
			e.mw.Route(o)
		})
	}
}

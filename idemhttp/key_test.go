package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem/idemhttp"
)

// K3: a malformed, repeated or listed key header is a 400 and nothing runs.
func TestMalformedKeyHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string // one header line each
	}{
		{"Empty", []string{""}},
		{"Blank", []string{"   "}},
		{"QuotedEmpty", []string{`""`}},
		{"QuotedList", []string{`"a", "b"`}},
		{"BareList", []string{"a, b"}},
		{"Unterminated", []string{`"abc`}},
		{"Parameter", []string{`"a";x=1`}},
		{"BareParameter", []string{"a;x=1"}},
		{"TextAfterString", []string{`"a" b`}},
		{"BadEscape", []string{`"a\n"`}},
		{"InnerSpace", []string{"a b"}},
		{"ControlChar", []string{"a\x01b"}},
		{"QuotedControlChar", []string{"\"a\x7fb\""}},
		{"Tab", []string{"a\tb"}},
		{"TooLong", []string{strings.Repeat("k", 256)}},
		{"QuotedTooLong", []string{`"` + strings.Repeat("k", 256) + `"`}},
		{"NonASCII", []string{"clé"}},
		{"QuotedNonASCII", []string{`"clé"`}},
		{"BareQuoteInside", []string{`ab"c`}},
		{"TwoLines", []string{"a", "b"}},
		{"TwoEqualLines", []string{"a", "a"}},
		{"TwoLinesOneEmpty", []string{"a", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			h := &effectHandler{}
			r := authed(httptest.NewRequest("POST", "/x", strings.NewReader("{}")))
			for _, v := range tc.values {
				r.Header.Add("Idempotency-Key", v)
			}
			w := httptest.NewRecorder()
			e.mw.Handler(h).ServeHTTP(w, r)
			p := checkProblem(t, w, idemhttp.ProblemInvalidKey, http.StatusBadRequest)
			if p.Detail == "" {
				t.Errorf("detail: got empty, want the reason")
			}
			if got := h.runs.Load(); got != 0 {
				t.Errorf("handler runs: got %d, want 0", got)
			}
		})
	}
}

// K3: the accepted forms, and that an sf-string and a bare token name the
// same key.
func TestValidKeyForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string
		key   string
	}{
		{"Bare", "abc", "abc"},
		{"Quoted", `"abc"`, "abc"},
		{"PaddedBare", "  abc\t", "abc"},
		{"UUID", "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{"QuotedWithEscapes", `"a\"b\\c"`, `a"b\c`},
		{"QuotedComma", `"a,b"`, "a,b"},
		{"Max", strings.Repeat("k", 255), strings.Repeat("k", 255)},
		{"Punctuation", "!#$%&'*+-.^_`|~:/?=", "!#$%&'*+-.^_`|~:/?="},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			w := serve(e.mw.Handler(&effectHandler{}), "POST", "/x", "", withKey(tc.value))
			if got, want := w.Code, http.StatusCreated; got != want {
				t.Fatalf("status: got %d, want %d (%s)", got, want, w.Body)
			}
			if e.record(t, alice, tc.key) == nil {
				t.Errorf("record for key %q: none", tc.key)
			}
		})
	}
}

func TestQuotedAndBareNameTheSameKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	handler := e.mw.Handler(h)
	serve(handler, "POST", "/x", "{}", withKey("abc"))
	w := serve(handler, "POST", "/x", "{}", withKey(`"abc"`))
	if got, want := w.Header().Get(idemhttp.ReplayedHeader), "true"; got != want {
		t.Errorf("%s: got %q, want %q", idemhttp.ReplayedHeader, got, want)
	}
	if got, want := h.runs.Load(), int64(1); got != want {
		t.Errorf("handler runs: got %d, want %d", got, want)
	}
}

// A missing key on a route that requires one is a 400 with its own type.
func TestMissingKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h := &effectHandler{}
	w := serve(e.mw.Handler(h), "POST", "/x", "{}")
	p := checkProblem(t, w, idemhttp.ProblemMissingKey, http.StatusBadRequest)
	if got, want := p.Title, "Idempotency-Key is missing"; got != want {
		t.Errorf("title: got %q, want %q", got, want)
	}
	if got := h.runs.Load(); got != 0 {
		t.Errorf("handler runs: got %d, want 0", got)
	}
}

// Config.Header renames the header.
func TestCustomHeaderName(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{Header: "x-request-key"}))
	h := &effectHandler{}
	handler := e.mw.Handler(h)
	checkProblem(t, serve(handler, "POST", "/x", "", withKey("k")), idemhttp.ProblemMissingKey, http.StatusBadRequest)
	if got, want := serve(handler, "POST", "/x", "", header("X-Request-Key", "k")).Code, http.StatusCreated; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
}

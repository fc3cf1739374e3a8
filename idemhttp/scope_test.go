package idemhttp_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// K2 with CredentialScope: the same key sent with two credentials names two
// independent requests: each runs once, each is replayed only to its own
// caller, and a different body under the other credential is not a
// mismatch. (The requests carry no principal: CredentialScope does not
// read it.)
func TestCrossCredential(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		aliceBody    string
		bobBody      string
		aliceCred    reqOpt
		bobCred      reqOpt
		sharedScopes bool
	}{
		{"BearerSameBody", `{"amount":10}`, `{"amount":10}`, header("Authorization", "Bearer alice"), header("Authorization", "Bearer bob"), false},
		{"BearerOtherBody", `{"amount":10}`, `{"amount":99}`, header("Authorization", "Bearer alice"), header("Authorization", "Bearer bob"), false},
		{"CookieSameBody", `{"amount":10}`, `{"amount":10}`, header("Cookie", "session=alice"), header("Cookie", "session=bob"), false},
		{"APIKeyOtherBody", `{"amount":10}`, `{"amount":99}`, header("X-API-Key", "alice"), header("X-API-Key", "bob"), false},
		{"CredentialVsAnonymous", `{"amount":10}`, `{"amount":10}`, header("Authorization", "Bearer alice"), func(*http.Request) {}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, withConfig(idemhttp.Config{Scope: idemhttp.CredentialScope, Anonymous: true}))
			h := &effectHandler{}
			handler := e.mw.Handler(h)

			alice1 := serve(handler, "POST", "/transfers", tc.aliceBody, withKey("shared"), tc.aliceCred, asPrincipal(""))
			bob1 := serve(handler, "POST", "/transfers", tc.bobBody, withKey("shared"), tc.bobCred, asPrincipal(""))
			alice2 := serve(handler, "POST", "/transfers", tc.aliceBody, withKey("shared"), tc.aliceCred, asPrincipal(""))
			bob2 := serve(handler, "POST", "/transfers", tc.bobBody, withKey("shared"), tc.bobCred, asPrincipal(""))

			if got, want := h.runs.Load(), int64(2); got != want {
				t.Errorf("handler runs: got %d, want %d (one per principal)", got, want)
			}
			if got := bob1.Header().Get(idemhttp.ReplayedHeader); got != "" {
				t.Errorf("bob's first request was replayed from alice's record (%s)", bob1.Body)
			}
			if got, want := bob1.Code, http.StatusCreated; got != want {
				t.Errorf("bob's first status: got %d, want %d", got, want)
			}
			if bob1.Body.String() == alice1.Body.String() {
				t.Errorf("bob got alice's body %s", alice1.Body)
			}
			if got, want := alice2.Body.String(), alice1.Body.String(); got != want {
				t.Errorf("alice's replay: got %s, want %s", got, want)
			}
			if got, want := bob2.Body.String(), bob1.Body.String(); got != want {
				t.Errorf("bob's replay: got %s, want %s", got, want)
			}
		})
	}
}

// DefaultScope is the principal WithPrincipal stored, whatever the
// credentials; without one it is ErrNoPrincipal, never a shared scope.
func TestDefaultScope(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		principal string
		opts      []reqOpt
		want      string
	}{
		{"Principal", "user:42", nil, "user:42"},
		{"PrincipalWithCredentials", "user:42", []reqOpt{header("Authorization", "Bearer a"), header("Cookie", "s=1")}, "user:42"},
		{"NoPrincipal", "", nil, ""},
		{"NoPrincipalWithCredentials", "", []reqOpt{header("Authorization", "Bearer a"), header("X-Api-Key", "k")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("POST", "/", nil)
			if tc.principal != "" {
				r = r.WithContext(idem.WithPrincipal(r.Context(), tc.principal))
			}
			for _, o := range tc.opts {
				o(r)
			}
			got, err := idemhttp.DefaultScope(r)
			if tc.want == "" {
				if !errors.Is(err, idem.ErrNoPrincipal) {
					t.Errorf("DefaultScope: got %q, %v; want ErrNoPrincipal", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("DefaultScope: got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	r := httptest.NewRequest("POST", "/", nil)
	r = r.WithContext(idem.WithPrincipal(r.Context(), ""))
	if p, ok := idem.PrincipalFrom(r.Context()); ok {
		t.Errorf("PrincipalFrom after WithPrincipal(\"\"): got %q, true; want none", p)
	}
}

func TestCredentialScope(t *testing.T) {
	t.Parallel()
	scope := func(opts ...reqOpt) string {
		r := httptest.NewRequest("POST", "/", nil)
		for _, o := range opts {
			o(r)
		}
		s, err := idemhttp.CredentialScope(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for name, opts := range map[string][]reqOpt{
		"None":          nil,
		"NoCredential":  {header("Accept", "x")},
		"UnknownHeader": {header("X-Auth-Token", "tenantA")},
		"EmptyCookie":   {header("Cookie", " ; ")},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		for _, o := range opts {
			o(r)
		}
		if s, err := idemhttp.CredentialScope(r); !errors.Is(err, idem.ErrNoPrincipal) {
			t.Errorf("%s: got %q, %v; want ErrNoPrincipal", name, s, err)
		}
	}
	a := scope(header("Authorization", "Bearer a"))
	if !strings.HasPrefix(a, "sha256:") {
		t.Errorf("scope: got %q, want sha256:<hex>", a)
	}
	if got, want := scope(header("Authorization", "Bearer a")), a; got != want {
		t.Errorf("same credentials: got %q, want %q", got, want)
	}
	for name, other := range map[string]string{
		"OtherToken":     scope(header("Authorization", "Bearer b")),
		"TokenAsAPIKey":  scope(header("X-Api-Key", "Bearer a")),
		"TokenAsCookie":  scope(header("Cookie", "Bearer a")),
		"TokenAndCookie": scope(header("Authorization", "Bearer a"), header("Cookie", "s=1")),
	} {
		if other == a || other == idem.AnonymousScope {
			t.Errorf("%s: got scope %q, want a scope of its own", name, other)
		}
	}
	c1 := scope(header("Cookie", "a=1; b=2"))
	if got, want := scope(header("Cookie", "b=2;a=1")), c1; got != want {
		t.Errorf("reordered cookies: got %q, want %q", got, want)
	}
	if got, want := scope(header("Cookie", "a=1"), header("Cookie", "b=2")), c1; got != want {
		t.Errorf("cookies on two lines: got %q, want %q", got, want)
	}
	if got := scope(header("Cookie", "a=1; b=3")); got == c1 {
		t.Errorf("other cookie value: got the same scope %q", got)
	}
	cert := func(raw string) reqOpt {
		return func(r *http.Request) {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{Raw: []byte(raw)}}}
		}
	}
	if got := scope(cert("one")); got == scope(cert("two")) || got == idem.AnonymousScope {
		t.Errorf("client certificates: got %q for both, want one scope each", got)
	}
}

// A custom Scope decides the scope; its error is a 500 and nothing runs.
func TestCustomScope(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(idemhttp.Config{Scope: func(r *http.Request) (string, error) {
		user := r.Header.Get("X-User")
		if user == "" {
			return "", errors.New("no principal")
		}
		return "user:" + user, nil
	}}))
	h := &effectHandler{}
	handler := e.mw.Handler(h)
	serve(handler, "POST", "/x", "", withKey("k"), header("X-User", "7"))
	if e.record(t, "user:7", "k") == nil {
		t.Errorf("record in scope user:7: none")
	}
	checkProblem(t, serve(handler, "POST", "/x", "", withKey("k")), idemhttp.ProblemInternal, http.StatusInternalServerError)
	if got, want := h.runs.Load(), int64(1); got != want {
		t.Errorf("handler runs: got %d, want %d", got, want)
	}
}

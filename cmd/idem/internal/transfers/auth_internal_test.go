package transfers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// authenticate hands the principal to the idempotency layer through
// idem.WithPrincipal, and the scope is that principal; an anonymous
// request gets the shared anonymous scope; a malformed header is a 401
// that reaches nothing.
func TestAuthenticateSetsPrincipal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		header    string
		principal string // "" for none
		scope     string
		status    int
	}{
		// "bearer:" and the first 32 hex digits of the token's SHA-256.
		{"Bearer alice", "bearer:2bd806c97f0e00af1a1fc3328fa763a9", "bearer:2bd806c97f0e00af1a1fc3328fa763a9", 200},
		{"bearer  bob ", "bearer:81b637d8fcd2c6da6359e6963113a117", "bearer:81b637d8fcd2c6da6359e6963113a117", 200},
		{"", "", idem.AnonymousScope, 200},
		{"Basic Zm9vOmJhcg==", "", "", 401},
		{"Bearer ", "", "", 401},
		{"Bearer", "", "", 401},
	} {
		var principal, sc string
		var reached bool
		h := authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached = true
			principal, _ = idem.PrincipalFrom(r.Context())
			// The scope idemhttp takes: the principal, or, with
			// Config.Anonymous as the service sets it, the anonymous
			// scope when there is none.
			var err error
			if sc, err = idemhttp.DefaultScope(r); errors.Is(err, idem.ErrNoPrincipal) {
				sc = idem.AnonymousScope
			} else if err != nil {
				t.Errorf("%q: scope: %v", tt.header, err)
			}
		}))
		r := httptest.NewRequest("POST", "/transfers", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.status || principal != tt.principal || sc != tt.scope || reached != (tt.status == 200) {
			t.Errorf("Authorization %q: status %d, principal %q, scope %q, reached %v; want %d, %q, %q",
				tt.header, w.Code, principal, sc, reached, tt.status, tt.principal, tt.scope)
		}
	}
}

// The principal of a bearer token never holds the token, is the same for
// the same token, and differs between tokens, even tokens that differ
// only in their last character or that are prefixes of each other.
func TestBearerPrincipalIsADigest(t *testing.T) {
	t.Parallel()
	const secret = "sk_live_SECRET123"
	tokens := []string{secret, secret + "4", secret[:len(secret)-1], secret[:len(secret)-1] + "4", "alice", "Alice"}
	seen := make(map[string]string)
	for _, token := range tokens {
		p := bearerPrincipal(token)
		if strings.Contains(p, token) {
			t.Errorf("principal of %q is %q: it holds the token", token, p)
		}
		if len(p) != len("bearer:")+32 || !strings.HasPrefix(p, "bearer:") {
			t.Errorf("principal of %q is %q, want bearer: and 32 hex digits", token, p)
		}
		if again := bearerPrincipal(token); again != p {
			t.Errorf("principal of %q is %q, then %q", token, p, again)
		}
		if other, ok := seen[p]; ok {
			t.Errorf("tokens %q and %q share the principal %q", other, token, p)
		}
		seen[p] = token
	}
}

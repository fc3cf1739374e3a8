package transfers

import (
	"errors"
	"net/http"
	"net/http/httptest"
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
		{"Bearer alice", "bearer:alice", "bearer:alice", 200},
		{"bearer  bob ", "bearer:bob", "bearer:bob", 200},
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

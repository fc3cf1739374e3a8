package transfers

import (
	"net/http"
	"strings"

	"github.com/idemkit/idem"
)

// authenticate is the demo's authentication: Authorization: Bearer <token>
// names the principal "bearer:<token>", handed to idemhttp with
// idem.WithPrincipal. A malformed Authorization header is refused with
// 401. A request without the header is let through as the anonymous
// principal, which the demo allows so that its clients need no
// credentials; a real service would refuse anonymous writes here. It runs
// before the idempotency layer, and its refusals are never recorded.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" {
			next.ServeHTTP(w, r) // no principal: idemhttp's anonymous scope
			return
		}
		scheme, token, ok := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			problem(w, http.StatusUnauthorized, "unauthorized", "Unauthorized", "use Authorization: Bearer <token>")
			return
		}
		next.ServeHTTP(w, r.WithContext(idem.WithPrincipal(r.Context(), "bearer:"+token)))
	})
}

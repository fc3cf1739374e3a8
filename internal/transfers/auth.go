package transfers

import (
	"context"
	"net/http"
	"strings"

	"github.com/idemkit/idem/idemhttp"
)

type anonymousKey struct{}

// authenticate is the demo's authentication: Authorization: Bearer <token>
// names the principal "bearer:<token>", handed to idemhttp with
// idemhttp.WithPrincipal. A malformed Authorization header is refused with
// 401. A request without the header is let through as the anonymous
// principal, which the demo allows so that its clients need no
// credentials; a real service would refuse anonymous writes here. It runs
// before the idempotency layer, and its refusals are never recorded.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		if h == "" {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), anonymousKey{}, true)))
			return
		}
		scheme, token, ok := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
			problem(w, http.StatusUnauthorized, "unauthorized", "Unauthorized", "use Authorization: Bearer <token>")
			return
		}
		next.ServeHTTP(w, r.WithContext(idemhttp.WithPrincipal(r.Context(), "bearer:"+token)))
	})
}

// scope is the idempotency layer's scope: the principal that authenticate
// established, or idemhttp.AnonymousScope for a request that authenticate
// let through as anonymous. Anything else is refused.
func scope(r *http.Request) (string, error) {
	if p, ok := idemhttp.PrincipalFrom(r.Context()); ok {
		return p, nil
	}
	if anon, _ := r.Context().Value(anonymousKey{}).(bool); anon {
		return idemhttp.AnonymousScope, nil
	}
	return "", errNotAuthenticated
}

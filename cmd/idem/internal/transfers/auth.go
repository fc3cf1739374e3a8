package transfers

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/idemkit/idem"
)

// authenticate is the demo's authentication: Authorization: Bearer <token>
// names the principal bearerPrincipal(token), handed to idemhttp with
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
		next.ServeHTTP(w, r.WithContext(idem.WithPrincipal(r.Context(), bearerPrincipal(token))))
	})
}

// bearerPrincipal is the principal of a bearer token: "bearer:" and the
// first 128 bits of the token's SHA-256, in hex. The principal becomes
// the records' scope, the stored request of a leased record and a field
// of log lines, so it must not be the credential itself: only its digest
// is ever stored or logged.
//
// The digest is not keyed. The principal must be the same in every
// replica and across restarts, so a key would be one more secret that
// every process shares and that can never change without moving every
// client's keys to a new scope; and a bearer token worth stealing is
// random, so its digest cannot be inverted by guessing. 128 bits keep two
// different tokens from sharing a principal in practice (a collision is
// expected only after some 2^64 tokens).
func bearerPrincipal(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "bearer:" + hex.EncodeToString(sum[:16])
}

package idemhttp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/http"
	"slices"
	"strings"
)

// AnonymousScope is the scope DefaultScope gives a request that carries no
// credentials. All anonymous requests share it.
const AnonymousScope = "anonymous"

// DefaultScope is the default Config.Scope. It derives the scope from
// everything in the request that commonly identifies the caller:
//
//   - every Authorization header value;
//   - every X-API-Key header value;
//   - the Cookie header, as the set of its name=value pairs (their order
//     does not count);
//   - the SHA-256 of the TLS client certificate, if one was presented.
//
// The scope is "sha256:" and the hex SHA-256 of those values, or
// AnonymousScope when there are none. Requests with different credentials
// therefore never share records, and the server never needs to know how
// the credentials are checked.
//
// The price of that safety is that anything which changes one of these
// values between two attempts (a refreshed access token, a tracking cookie
// that is rewritten on every response) makes the retry a new request, which
// runs again. Where an authentication middleware establishes a stable
// principal (a user or tenant id), set Config.Scope to a function that
// returns it; and where callers authenticate by any other means (another
// header, a query parameter), Config.Scope must be set, since DefaultScope
// would put them all in one scope.
//
// The scope is stored with each record. It is an unsalted hash: fine for
// high-entropy tokens and session ids, but a guessable credential (HTTP
// Basic passwords, short API keys) could be recovered from the records
// table by trying candidates. Such deployments should set Config.Scope.
func DefaultScope(r *http.Request) (string, error) {
	h := sha256.New()
	n := 0
	for _, v := range r.Header.Values("Authorization") {
		scopeField(h, "authorization", v)
		n++
	}
	for _, v := range r.Header.Values("X-Api-Key") {
		scopeField(h, "x-api-key", v)
		n++
	}
	var cookies []string
	for _, line := range r.Header.Values("Cookie") {
		for pair := range strings.SplitSeq(line, ";") {
			if pair = strings.TrimSpace(pair); pair != "" {
				cookies = append(cookies, pair)
			}
		}
	}
	slices.Sort(cookies)
	for _, c := range cookies {
		scopeField(h, "cookie", c)
		n++
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		scopeField(h, "client-certificate", string(sum[:]))
		n++
	}
	if n == 0 {
		return AnonymousScope, nil
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func scopeField(h hash.Hash, name, value string) {
	for _, s := range [2]string{name, value} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
}

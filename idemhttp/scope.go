package idemhttp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/http"
	"slices"
	"strings"

	"github.com/idemkit/idem"
)

// DefaultScope is the default Config.Scope: the principal that
// authentication stored in the request's context with idem.WithPrincipal. A
// request without one gets idem.ErrNoPrincipal.
//
// The principal is the identity authentication established (a user, client
// or tenant id), not the bytes of a credential: a refreshed token leaves it
// unchanged, so a retry sent with the new token is still a replay, and
// callers authenticated by any scheme are kept apart as long as their
// principals differ.
func DefaultScope(r *http.Request) (string, error) {
	if p, ok := idem.PrincipalFrom(r.Context()); ok {
		return p, nil
	}
	return "", idem.ErrNoPrincipal
}

// CredentialScope is a Config.Scope for gateways that cannot know the
// principal. It hashes what commonly carries a caller's credentials:
//
//   - every Authorization header value;
//   - every X-API-Key header value;
//   - the Cookie header, as the set of its name=value pairs (their order
//     does not count);
//   - the SHA-256 of the TLS client certificate, if one was presented.
//
// The scope is "sha256:" and the hex SHA-256 of those values. A request
// with none of them gets idem.ErrNoPrincipal.
//
// Prefer DefaultScope with idem.WithPrincipal wherever authentication runs in
// the same process; CredentialScope has three costs:
//
//   - Anything that changes one of these values between two attempts (a
//     refreshed access token, a cookie rewritten on every response) makes
//     the retry a new request, which runs again.
//   - Credentials it does not look at (another header, a query parameter)
//     do not separate callers: two callers who authenticate with, say,
//     X-Auth-Token and send the same cookie share one scope. Use it only
//     where the values above are what authenticates the caller.
//   - The scope is stored with each record and is an unsalted hash: fine
//     for high-entropy tokens and session ids, but a guessable credential
//     (an HTTP Basic password, a short API key) could be recovered from
//     the records by trying candidates.
func CredentialScope(r *http.Request) (string, error) {
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
		return "", idem.ErrNoPrincipal
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

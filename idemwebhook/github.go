package idemwebhook

import (
	"encoding/hex"
	"net/http"
	"strings"
)

// GitHub's headers.
const (
	GitHubSignatureHeader = "X-Hub-Signature-256"
	GitHubDeliveryHeader  = "X-Github-Delivery"
)

// GitHub verifies GitHub's webhooks: X-Hub-Signature-256 is "sha256=" and
// the hex HMAC-SHA256 of the body under the webhook's secret; the delivery
// id is X-GitHub-Delivery (a redelivery from GitHub's settings keeps it).
// GitHub signs no timestamp, so Config.Tolerance does not apply: only the
// delivery id stops a replayed delivery.
type GitHub struct{ keys [][]byte }

// NewGitHub returns a GitHub verifier that accepts a signature made with
// any of secrets.
func NewGitHub(secrets ...string) (*GitHub, error) {
	if len(secrets) == 0 {
		return nil, noSecrets("GitHub")
	}
	v := &GitHub{}
	for _, s := range secrets {
		v.keys = append(v.keys, []byte(s))
	}
	return v, nil
}

// Provider implements Verifier.
func (*GitHub) Provider() string { return "github" }

// Verify implements Verifier.
func (v *GitHub) Verify(h http.Header, body []byte) (Delivery, error) {
	sig := h.Get(GitHubSignatureHeader)
	if sig == "" {
		return Delivery{}, Reject(ReasonMissingSignature, "X-Hub-Signature-256 is required")
	}
	hexMAC, ok := strings.CutPrefix(sig, "sha256=")
	mac, err := hex.DecodeString(hexMAC)
	if !ok || err != nil {
		return Delivery{}, Reject(ReasonMalformedSignature, "X-Hub-Signature-256 must be sha256=<hex>")
	}
	if !anyMatch(macsOf(v.keys, body), [][]byte{mac}) {
		return Delivery{}, errBadSignature()
	}
	id := h.Get(GitHubDeliveryHeader)
	if id == "" {
		return Delivery{}, Reject(ReasonMissingID, "X-GitHub-Delivery is required")
	}
	return Delivery{ID: id}, nil
}

// SignGitHub returns the X-Hub-Signature-256 value of body under secret.
func SignGitHub(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(hmacSHA256([]byte(secret), body))
}

// macsOf returns the HMAC-SHA256 of body under each key.
func macsOf(keys [][]byte, body []byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = hmacSHA256(k, body)
	}
	return out
}

package idemwebhook

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers (https://www.standardwebhooks.com), used by Svix
// and the providers that send through it.
const (
	StandardIDHeader        = "Webhook-Id"
	StandardTimestampHeader = "Webhook-Timestamp"
	StandardSignatureHeader = "Webhook-Signature"
)

// StandardSecretPrefix starts a Standard Webhooks secret; the base64 of
// the key follows it.
const StandardSecretPrefix = "whsec_"

// Standard verifies Standard Webhooks: the webhook-signature header holds
// one or more space-separated "v1,<base64>" signatures, each the
// HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" under the key a
// secret names; the delivery id is webhook-id.
type Standard struct {
	provider string
	keys     [][]byte
}

// NewStandard returns a Standard Webhooks verifier for provider "standard"
// that accepts a signature made with any of secrets ("whsec_" and base64;
// the bare base64 is accepted too). Give the old and the new secret while
// rotating.
func NewStandard(secrets ...string) (*Standard, error) {
	if len(secrets) == 0 {
		return nil, noSecrets("Standard Webhooks")
	}
	v := &Standard{provider: "standard"}
	for i, s := range secrets {
		key, err := StandardKey(s)
		if err != nil {
			return nil, fmt.Errorf("idemwebhook: Standard Webhooks secret %d: %w", i+1, err)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// WithProvider returns a copy of v that names provider (for example
// "svix"), for the scope, logs and metrics.
func (v *Standard) WithProvider(provider string) *Standard {
	c := *v
	c.provider = provider
	return &c
}

// StandardKey decodes a Standard Webhooks secret into its HMAC key.
func StandardKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, StandardSecretPrefix))
	switch {
	case err != nil:
		return nil, fmt.Errorf("a secret is %q and base64: %w", StandardSecretPrefix, err)
	case len(key) == 0:
		return nil, fmt.Errorf("the secret is empty")
	}
	return key, nil
}

// Provider implements Verifier.
func (v *Standard) Provider() string { return v.provider }

// Verify implements Verifier.
func (v *Standard) Verify(h http.Header, body []byte) (Delivery, error) {
	id, ts, sigs := h.Get(StandardIDHeader), h.Get(StandardTimestampHeader), h.Get(StandardSignatureHeader)
	if id == "" || ts == "" || sigs == "" {
		return Delivery{}, Reject(ReasonMissingSignature, "webhook-id, webhook-timestamp and webhook-signature are required")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Delivery{}, Reject(ReasonMalformedSignature, "webhook-timestamp must be whole seconds since 1970")
	}
	var candidates [][]byte
	for sig := range strings.FieldsSeq(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue // another version: not ours to check
		}
		mac, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		candidates = append(candidates, mac)
	}
	if len(candidates) == 0 {
		return Delivery{}, Reject(ReasonMalformedSignature, "webhook-signature holds no v1 signature")
	}
	expected := make([][]byte, len(v.keys))
	for i, k := range v.keys {
		expected[i] = hmacSHA256(k, []byte(id), []byte{'.'}, []byte(ts), []byte{'.'}, body)
	}
	if !anyMatch(expected, candidates) {
		return Delivery{}, errBadSignature()
	}
	return Delivery{ID: id, Timestamp: time.Unix(sec, 0)}, nil
}

// SignStandard returns the webhook-signature value ("v1,<base64>") of a
// Standard Webhooks delivery, for senders and tests.
func SignStandard(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := StandardKey(secret)
	if err != nil {
		return "", err
	}
	t := strconv.FormatInt(ts.Unix(), 10)
	return "v1," + base64.StdEncoding.EncodeToString(hmacSHA256(key, []byte(id), []byte{'.'}, []byte(t), []byte{'.'}, body)), nil
}

// StandardHeaders sets the three Standard Webhooks headers of a delivery
// on h, signed with secret.
func StandardHeaders(h http.Header, secret, id string, ts time.Time, body []byte) error {
	sig, err := SignStandard(secret, id, ts, body)
	if err != nil {
		return err
	}
	h.Set(StandardIDHeader, id)
	h.Set(StandardTimestampHeader, strconv.FormatInt(ts.Unix(), 10))
	h.Set(StandardSignatureHeader, sig)
	return nil
}

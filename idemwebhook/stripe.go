package idemwebhook

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// StripeSignatureHeader carries Stripe's signatures.
const StripeSignatureHeader = "Stripe-Signature"

// Stripe verifies Stripe's webhooks: Stripe-Signature holds
// "t=<unix seconds>" and one or more "v1=<hex>" elements, each the
// HMAC-SHA256 of "<t>.<body>" under the endpoint's signing secret (the
// whole "whsec_…" string is the key). The delivery id is the event's "id"
// member in the body, the same on every retry of the event.
type Stripe struct{ keys [][]byte }

// NewStripe returns a Stripe verifier that accepts a signature made with
// any of secrets; Stripe signs with each live secret while one is rolled.
func NewStripe(secrets ...string) (*Stripe, error) {
	if len(secrets) == 0 {
		return nil, noSecrets("Stripe")
	}
	v := &Stripe{}
	for _, s := range secrets {
		v.keys = append(v.keys, []byte(s))
	}
	return v, nil
}

// Provider implements Verifier.
func (*Stripe) Provider() string { return "stripe" }

// Verify implements Verifier.
func (v *Stripe) Verify(h http.Header, body []byte) (Delivery, error) {
	hdr := h.Get(StripeSignatureHeader)
	if hdr == "" {
		return Delivery{}, Reject(ReasonMissingSignature, "Stripe-Signature is required")
	}
	var ts string
	var candidates [][]byte
	for item := range strings.SplitSeq(hdr, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = val
		case "v1":
			if mac, err := hex.DecodeString(val); err == nil {
				candidates = append(candidates, mac)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(candidates) == 0 {
		return Delivery{}, Reject(ReasonMalformedSignature, "Stripe-Signature needs t=<seconds> and at least one v1=<hex>")
	}
	expected := make([][]byte, len(v.keys))
	for i, k := range v.keys {
		expected[i] = hmacSHA256(k, []byte(ts), []byte{'.'}, body)
	}
	if !anyMatch(expected, candidates) {
		return Delivery{}, errBadSignature()
	}
	var event struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &event); err != nil || event.ID == "" {
		return Delivery{}, Reject(ReasonMissingID, "the event has no \"id\"")
	}
	return Delivery{ID: event.ID, Timestamp: time.Unix(sec, 0)}, nil
}

// SignStripe returns the Stripe-Signature value of body signed at ts with
// secret, for tests.
func SignStripe(secret string, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(hmacSHA256([]byte(secret), []byte(t), []byte{'.'}, body))
}

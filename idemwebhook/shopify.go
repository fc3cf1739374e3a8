package idemwebhook

import (
	"encoding/base64"
	"net/http"
)

// Shopify's headers.
const (
	ShopifySignatureHeader = "X-Shopify-Hmac-Sha256"
	ShopifyIDHeader        = "X-Shopify-Webhook-Id"
)

// Shopify verifies Shopify's webhooks: X-Shopify-Hmac-Sha256 is the base64
// HMAC-SHA256 of the body under the app's client secret; the delivery id
// is X-Shopify-Webhook-Id, the same on every retry. Shopify signs no
// timestamp, so Config.Tolerance does not apply.
type Shopify struct{ keys [][]byte }

// NewShopify returns a Shopify verifier that accepts a signature made with
// any of secrets.
func NewShopify(secrets ...string) (*Shopify, error) {
	if len(secrets) == 0 {
		return nil, noSecrets("Shopify")
	}
	v := &Shopify{}
	for _, s := range secrets {
		v.keys = append(v.keys, []byte(s))
	}
	return v, nil
}

// Provider implements Verifier.
func (*Shopify) Provider() string { return "shopify" }

// Verify implements Verifier.
func (v *Shopify) Verify(h http.Header, body []byte) (Delivery, error) {
	sig := h.Get(ShopifySignatureHeader)
	if sig == "" {
		return Delivery{}, Reject(ReasonMissingSignature, "X-Shopify-Hmac-Sha256 is required")
	}
	mac, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return Delivery{}, Reject(ReasonMalformedSignature, "X-Shopify-Hmac-Sha256 must be base64")
	}
	if !anyMatch(macsOf(v.keys, body), [][]byte{mac}) {
		return Delivery{}, errBadSignature()
	}
	id := h.Get(ShopifyIDHeader)
	if id == "" {
		return Delivery{}, Reject(ReasonMissingID, "X-Shopify-Webhook-Id is required")
	}
	return Delivery{ID: id}, nil
}

// SignShopify returns the X-Shopify-Hmac-Sha256 value of body under secret.
func SignShopify(secret string, body []byte) string {
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), body))
}

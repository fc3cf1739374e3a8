package providertest

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v74/github"
	"github.com/idemkit/idem/idemwebhook"
	"github.com/stripe/stripe-go/v82/webhook"
	svix "github.com/svix/svix-webhooks/go"
)

var body = []byte(`{"id":"evt_1PvBcD2eZvKYlo2C","object":"event","type":"payment_intent.succeeded"}`)

// stripe-go's own test signer makes Stripe-Signature; idemwebhook accepts
// it under the secret (and the old one of a roll), refuses it under
// another, and refuses it once the body changes by one byte. idemwebhook's
// signer is accepted by stripe-go's verifier.
func TestStripeGo(t *testing.T) {
	ts := time.Now()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_test_secret", Timestamp: ts})
	h := http.Header{}
	h.Set("Stripe-Signature", signed.Header)

	v, _ := idemwebhook.NewStripe("whsec_rolled_away", "whsec_test_secret")
	d, err := v.Verify(h, body)
	if err != nil || d.ID != "evt_1PvBcD2eZvKYlo2C" || d.Timestamp.Unix() != ts.Unix() {
		t.Fatalf("%+v %v", d, err)
	}
	other, _ := idemwebhook.NewStripe("whsec_other")
	if _, err := other.Verify(h, body); err == nil {
		t.Fatal("another secret verified")
	}
	changed := bytes.Replace(body, []byte("succeeded"), []byte("succeedes"), 1)
	if _, err := v.Verify(h, changed); err == nil {
		t.Fatal("a changed body verified")
	}
	if err := webhook.ValidatePayload(body, idemwebhook.SignStripe("whsec_test_secret", ts, body), "whsec_test_secret"); err != nil {
		t.Fatalf("stripe-go refuses idemwebhook's signature: %v", err)
	}
}

// svix's own library (Standard Webhooks) signs; idemwebhook verifies, and
// svix verifies what idemwebhook signs.
func TestSvix(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now()
	sig, err := wh.Sign("msg_2Lh9KRb0pzN4LePd3XiA4Kv8ETR", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_2Lh9KRb0pzN4LePd3XiA4Kv8ETR")
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	v, _ := idemwebhook.NewStandard("whsec_bmV3LXNlY3JldA==", secret)
	if d, err := v.Verify(h, body); err != nil || d.ID != "msg_2Lh9KRb0pzN4LePd3XiA4Kv8ETR" {
		t.Fatalf("%+v %v", d, err)
	}
	if _, err := v.Verify(h, append(bytes.Clone(body), ' ')); err == nil {
		t.Fatal("a changed body verified")
	}
	h2 := h.Clone()
	h2.Set("webhook-id", "msg_other")
	if _, err := v.Verify(h2, body); err == nil {
		t.Fatal("the signature verified under another webhook-id")
	}
	mine := http.Header{}
	if err := idemwebhook.StandardHeaders(mine, secret, "msg_x", ts, body); err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, mine); err != nil {
		t.Fatalf("svix refuses idemwebhook's signature: %v", err)
	}
}

// go-github's ValidateSignature accepts idemwebhook's X-Hub-Signature-256
// and refuses it for a changed body; idemwebhook verifies the same value.
func TestGoGitHub(t *testing.T) {
	secret := []byte("It's a Secret to Everybody")
	sig := idemwebhook.SignGitHub(string(secret), body)
	if err := github.ValidateSignature(sig, body, secret); err != nil {
		t.Fatalf("go-github refuses idemwebhook's signature: %v", err)
	}
	if err := github.ValidateSignature(sig, append(bytes.Clone(body), ' '), secret); err == nil {
		t.Fatal("go-github accepted a changed body")
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", sig)
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	v, _ := idemwebhook.NewGitHub(string(secret))
	if _, err := v.Verify(h, body); err != nil {
		t.Fatal(err)
	}
}

package idemwebhook_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idem/idemwebhook"
)

func reason(t *testing.T, err error) idemwebhook.Reason {
	t.Helper()
	var re *idemwebhook.RejectError
	if !errors.As(err, &re) {
		t.Fatalf("not a refusal: %v", err)
	}
	return re.Reason
}

// The vectors below are computed from each provider's documented
// algorithm; the providertest module checks the same verifiers against
// the providers' own code.

func TestStandardVector(t *testing.T) {
	// The Standard Webhooks specification's example: this secret, id,
	// timestamp and payload give this signature.
	v, err := idemwebhook.NewStandard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	d, err := v.Verify(h, []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "msg_p5jXN8AQM9LWM0D4loKWxJek" || !d.Timestamp.Equal(time.Unix(1614265330, 0)) {
		t.Fatalf("%+v", d)
	}
	if _, err := v.Verify(h, []byte(`{"test": 2432232315}`)); reason(t, err) != idemwebhook.ReasonBadSignature {
		t.Fatal(err)
	}
}

func TestGitHubVector(t *testing.T) {
	// GitHub's documentation: this secret and payload give this signature.
	v, _ := idemwebhook.NewGitHub("It's a Secret to Everybody")
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	d, err := v.Verify(h, []byte("Hello, World!"))
	if err != nil || d.ID != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || !d.Timestamp.IsZero() {
		t.Fatalf("%+v %v", d, err)
	}
	if got := idemwebhook.SignGitHub("It's a Secret to Everybody", []byte("Hello, World!")); got != h.Get("X-Hub-Signature-256") {
		t.Fatal(got)
	}
	h.Del("X-GitHub-Delivery")
	if _, err := v.Verify(h, []byte("Hello, World!")); reason(t, err) != idemwebhook.ReasonMissingID {
		t.Fatal(err)
	}
	h.Set("X-Hub-Signature-256", "sha1=00")
	if _, err := v.Verify(h, []byte("Hello, World!")); reason(t, err) != idemwebhook.ReasonMalformedSignature {
		t.Fatal(err)
	}
}

func TestShopifyRotationAndTamper(t *testing.T) {
	body := []byte(`{"id":820982911946154508,"email":"jon@example.com"}`)
	v, _ := idemwebhook.NewShopify("old-secret", "new-secret")
	for _, s := range []string{"old-secret", "new-secret", "unknown"} {
		h := http.Header{}
		h.Set("X-Shopify-Hmac-Sha256", idemwebhook.SignShopify(s, body))
		h.Set("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")
		_, err := v.Verify(h, body)
		if (s == "unknown") != (err != nil) {
			t.Fatalf("secret %s: %v", s, err)
		}
	}
}

func TestStripeSignatureElements(t *testing.T) {
	body := []byte(`{"id":"evt_1","object":"event"}`)
	ts := time.Unix(1_800_000_000, 0)
	v, _ := idemwebhook.NewStripe("whsec_new", "whsec_old")
	h := http.Header{}
	// Stripe sends one v1 per live secret, and a v0 that is not checked.
	old := idemwebhook.SignStripe("whsec_old", ts, body)
	h.Set("Stripe-Signature", old+",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39")
	d, err := v.Verify(h, body)
	if err != nil || d.ID != "evt_1" || !d.Timestamp.Equal(ts) {
		t.Fatalf("%+v %v", d, err)
	}
	h.Set("Stripe-Signature", idemwebhook.SignStripe("whsec_other", ts, body))
	if _, err := v.Verify(h, body); reason(t, err) != idemwebhook.ReasonBadSignature {
		t.Fatal(err)
	}
	h.Set("Stripe-Signature", idemwebhook.SignStripe("whsec_old", ts, []byte(`{"object":"event"}`)))
	if _, err := v.Verify(h, []byte(`{"object":"event"}`)); reason(t, err) != idemwebhook.ReasonMissingID {
		t.Fatal(err)
	}
}

func TestGenericHMAC(t *testing.T) {
	for _, enc := range []idemwebhook.Encoding{idemwebhook.Hex, idemwebhook.Base64} {
		for _, signed := range []idemwebhook.Signed{idemwebhook.SignedBody, idemwebhook.SignedTimestampBody, idemwebhook.SignedIDTimestampBody} {
			v, err := idemwebhook.NewHMAC(idemwebhook.HMACConfig{
				Provider: "acme", Secrets: []string{"s1", "s2"}, SignatureHeader: "X-Acme-Signature", Prefix: "sha256=",
				Encoding: enc, IDHeader: "X-Acme-Id", TimestampHeader: "X-Acme-Time", Signed: signed,
			})
			if err != nil {
				t.Fatal(err)
			}
			ts := time.Unix(1_700_000_000, 0)
			body := []byte("payload")
			h := http.Header{}
			h.Set("X-Acme-Signature", v.Sign("d1", ts, body))
			h.Set("X-Acme-Id", "d1")
			h.Set("X-Acme-Time", "1700000000")
			if d, err := v.Verify(h, body); err != nil || d.ID != "d1" || !d.Timestamp.Equal(ts) {
				t.Fatalf("enc %d signed %d: %+v %v", enc, signed, d, err)
			}
			tampered := map[string]string{"X-Acme-Time": "1700000001", "X-Acme-Id": "d2"}
			for name, val := range tampered {
				h2 := h.Clone()
				h2.Set(name, val)
				_, err := v.Verify(h2, body)
				covered := signed == idemwebhook.SignedIDTimestampBody || (signed == idemwebhook.SignedTimestampBody && name == "X-Acme-Time")
				if covered != (err != nil) {
					t.Fatalf("enc %d signed %d, %s changed: %v", enc, signed, name, err)
				}
			}
		}
	}
	if _, err := idemwebhook.NewHMAC(idemwebhook.HMACConfig{Provider: "x", Secrets: []string{"s"}, SignatureHeader: "A", IDHeader: "B", Signed: idemwebhook.SignedTimestampBody}); err == nil {
		t.Fatal("a signed timestamp without its header was accepted")
	}
}

func TestSecretsRequired(t *testing.T) {
	if _, err := idemwebhook.NewStandard(); err == nil {
		t.Fatal("no secret")
	}
	if _, err := idemwebhook.NewStandard("whsec_!!"); err == nil {
		t.Fatal("not base64")
	}
}

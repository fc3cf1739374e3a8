package idem_test

import (
	"testing"

	"github.com/idemkit/idem"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: []byte(`{"from":1,"to":2,"amount":500}`), JSON: true}
	fp := idem.NewFingerprint(base)
	if len(fp) != 67 || fp[:3] != "v1:" {
		t.Fatalf("fingerprint %q: want v1: and 64 hex digits", fp)
	}
	same := func(name string, in idem.FingerprintInput) {
		t.Run(name, func(t *testing.T) {
			if got := idem.NewFingerprint(in); got != fp {
				t.Errorf("fingerprint differs from the base request: %s vs %s", got, fp)
			}
		})
	}
	differs := func(name string, in idem.FingerprintInput) {
		t.Run(name, func(t *testing.T) {
			if got := idem.NewFingerprint(in); got == fp {
				t.Errorf("fingerprint equals the base request's, want a difference")
			}
		})
	}
	with := func(f func(*idem.FingerprintInput)) idem.FingerprintInput {
		in := base
		f(&in)
		return in
	}
	same("KeyOrder", with(func(in *idem.FingerprintInput) { in.Body = []byte(`{"amount":500,"to":2,"from":1}`) }))
	same("Whitespace", with(func(in *idem.FingerprintInput) { in.Body = []byte("{ \"from\": 1,\n \"to\": 2, \"amount\": 500 }") }))
	differs("Amount", with(func(in *idem.FingerprintInput) { in.Body = []byte(`{"from":1,"to":2,"amount":501}`) }))
	differs("NumberLiteral", with(func(in *idem.FingerprintInput) { in.Body = []byte(`{"from":1,"to":2,"amount":500.0}`) }))
	differs("Method", with(func(in *idem.FingerprintInput) { in.Method = "PATCH" }))
	differs("Route", with(func(in *idem.FingerprintInput) { in.Route = "/payments" }))
	differs("Extra", with(func(in *idem.FingerprintInput) { in.Extra = []string{"X-Account: 1"} }))
	differs("RawBodyNotCanonicalised", with(func(in *idem.FingerprintInput) { in.JSON = false }))
	differs("FieldsDoNotRunTogether", with(func(in *idem.FingerprintInput) { in.Method, in.Route = "POST/", "transfers" }))

	t.Run("RawBodiesCompareBytes", func(t *testing.T) {
		a := idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"a":1,"b":2}`)})
		b := idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"b":2,"a":1}`)})
		if a == b {
			t.Error("raw bodies with different bytes share a fingerprint")
		}
	})
	t.Run("DuplicateKeysFallBackToRawBytes", func(t *testing.T) {
		a := idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"a":1,"a":2}`), JSON: true})
		b := idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"a":2,"a":1}`), JSON: true})
		if a == b {
			t.Error("ambiguous JSON bodies with different bytes share a fingerprint")
		}
	})
}

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
	t.Run("CaseFoldedDuplicatesFallBackToRawBytes", func(t *testing.T) {
		// encoding/json reads amount 7 from the first and 5 from the second.
		a := idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"from":"a","to":"b","amount":5,"Amount":7}`), JSON: true})
		b := idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"from":"a","to":"b","Amount":7,"amount":5}`), JSON: true})
		if a == b {
			t.Error("bodies that a case-insensitive decoder reads differently share a fingerprint")
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

// Fingerprints are stored with records: for the same input they must never
// change, or retries after an upgrade would be refused (or worse). These
// values were computed before canonicalisation was rewritten.
func TestFingerprintIsStable(t *testing.T) {
	t.Parallel()
	tests := []struct{ body, want string }{
		{`{"from":"acc-1","to":"acc-2","amount":500,"note":"caf\u00e9 \ud83d\ude00 \"q\" \\ \n","tags":["a",{"z":1,"y":[true,false,null,-1.5e+10]}]}`,
			"v1:0f846afe83785a59832170c50551e691c466435cdce1104d17ef00ba013bb9b7"},
		{`[]`, "v1:22237dc6e482106e484e803de0ea6cdaab4a63f9d95b0b7fa21c497c4d89b91f"},
		{`{"b":{"d":1,"c":2},"a":0}`, "v1:14b4bb5aa52abc2ca1d2d28c43d6ab08674123322a61f7d064fdb34821474ea5"},
	}
	for _, tt := range tests {
		got := idem.NewFingerprint(idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: []byte(tt.body), JSON: true, Extra: []string{"x"}})
		if got != tt.want {
			t.Errorf("NewFingerprint(%s) = %s, want %s", tt.body, got, tt.want)
		}
	}
}

package idem_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/canonjson/canonjsontest"
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

// More fingerprints pinned the same way, computed before canonical JSON
// moved into internal/canonjson: bodies in and out of order, with escapes,
// raw bodies, bodies that have no canonical form (hashed raw), Extra values,
// and canonical forms long enough to be hashed in several writes.
func TestFingerprintGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   idem.FingerprintInput
		want string
	}{
		{"Reordered", idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: []byte(`{"to":2,"amount":500,"from":1}`), JSON: true},
			"v1:a9076bcda5b8cd7e4d00f293e391b37e8788120167c655f080c89954775fa31c"},
		{"InOrderWithSpace", idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: []byte(" {\"amount\" : 500,\n\t\"from\":1, \"to\":2} "), JSON: true},
			"v1:a9076bcda5b8cd7e4d00f293e391b37e8788120167c655f080c89954775fa31c"},
		{"Escapes", idem.FingerprintInput{Method: "PUT", Route: "PUT /notes/{id}", Body: []byte(`{"\u0074ext":"caf\u00e9 \ud83d\ude00 \ud800 \u0000\u001f \/ \" \\ <&>","a":"\t\r\n\b\f"}`), JSON: true,
			Extra: []string{"X-Account: 1", ""}}, "v1:e715f26bd1481a8d26957789185f000398a3c6747096e3f03be7df3957229ae1"},
		{"NestedOutOfOrder", idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`[{"z":[{"y":1,"x":2},{}],"a":{"c":[],"b":null}},-0.5e+7,true,false]`), JSON: true},
			"v1:b2b78ede8f3b811d67013b3bdc9a28c60d250750c9c9b489eb360cbfc5040f84"},
		{"RawBody", idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"b":2,"a":1}`)},
			"v1:9bb7b9c35668a4044d6320ba2f760168128448b3744f0e933f7c696912300cdd"},
		{"RawForm", idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte("amount=500&to=2"), Extra: []string{"a", "b", "c"}},
			"v1:347b099b5700660cc4134ae1451c190e5c6b1558e7d492aa10b8af45c1dd091c"},
		{"InvalidJSONHashedRaw", idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"a":1,`), JSON: true},
			"v1:f62fdc4d6215ad8140f050ec163d2b08c5b0fe250127744368a89340e27625a1"},
		{"FoldedNamesHashedRaw", idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{"amount":5,"Amount":7}`), JSON: true},
			"v1:bbd76bf21b4667fac693b03891c232a210127552a57df53a7ad10858bd37ec86"},
		{"EmptyBodyJSON", idem.FingerprintInput{Method: "DELETE", Route: "/r/1", JSON: true},
			"v1:95176e5f36efa92392e5d4b4422aa67fca284159f08b577c8d06b871bc4ef928"},
		{"EmptyBodyRaw", idem.FingerprintInput{Method: "DELETE", Route: "/r/1"},
			"v1:95176e5f36efa92392e5d4b4422aa67fca284159f08b577c8d06b871bc4ef928"},
		{"EmptyEverything", idem.FingerprintInput{},
			"v1:c01cbb61f2ccd5d72d9381c409c4ea882222c8ffb6cea70bde18b6f81376e431"},
		{"ExtraOrder", idem.FingerprintInput{Method: "POST", Route: "/r", Body: []byte(`{}`), JSON: true, Extra: []string{"c", "b", "a"}},
			"v1:8ba96065baa98580aa3ab222c1709e19c8c5fc683e3b978614c858fed6749188"},
		{"LongStrings", idem.FingerprintInput{Method: "POST", Route: "/r", Body: longStrings(), JSON: true},
			"v1:7bc37682e7039079466010da58c44ba0388cff1a24e8301e765738194aa97d5a"},
		{"ManyMembers", idem.FingerprintInput{Method: "POST", Route: "/r", Body: manyMembers(), JSON: true, Extra: []string{"x"}},
			"v1:7f42258bbf17e10786b5c0d9d9290e4ec9bf0cba2f8bc04a417ed9503f52bc3b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := idem.NewFingerprint(tt.in); got != tt.want {
				t.Errorf("NewFingerprint = %s, want %s", got, tt.want)
			}
		})
	}
}

// longStrings is an object whose canonical form is about 40 KiB, with
// strings longer than the buffer the canonical form is hashed through.
func longStrings() []byte {
	return []byte(`{"z":"` + strings.Repeat("x", 20000) + `","a":"` + strings.Repeat(`\u00e9\n`, 2000) + `","m":[` +
		strings.Repeat(`"\u0041b",`, 1000) + `1]}`)
}

// manyMembers is an array of objects out of order, about 80 KiB.
func manyMembers() []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"user-%d","tags":["t%d"],"address":{"zip":"1%04d","city":"Lisbon"}}`, i, i, i%7, i)
	}
	b.WriteByte(']')
	return []byte(b.String())
}

func TestCanonicalJSONErrorIsErrNotCanonicalizable(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{``, `{"a":1,"a":2}`, `{"a":1,"A":2}`, "\"\xff\"", `[1]]`} {
		if _, err := idem.CanonicalJSON([]byte(doc)); !errors.Is(err, idem.ErrNotCanonicalizable) {
			t.Errorf("CanonicalJSON(%q) error %v; want one that matches ErrNotCanonicalizable", doc, err)
		}
	}
}

// BenchmarkFingerprint is in docs/BENCHMARKS.md, section "Fingerprint
// (canonical JSON)", with the benchmarks of internal/canonjson on the same
// bodies.
func BenchmarkFingerprint(b *testing.B) {
	for _, bb := range canonjsontest.Bodies() {
		b.Run(bb.Name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.Doc)))
			b.ReportAllocs()
			in := idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: bb.Doc, JSON: true}
			for b.Loop() {
				idem.NewFingerprint(in)
			}
		})
	}
}

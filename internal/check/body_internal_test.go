package check

import (
	"encoding/json"
	"testing"

	"github.com/idemkit/idem"
)

func TestChangeOne(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want, what string }{
		{`{"to":"bob","amount":10}`, `{"to":"bob","amount":11}`, `member "amount": 10 → 11`},
		{`{"a":1.5,"b":2}`, `{"a":2.5,"b":2}`, `member "a": 1.5 → 2.5`},
		{`{"to":"bob","x":{"n":1}}`, `{"to":"bob-2","x":{"n":1}}`, `member "to": "bob" → "bob-2"`},
		{`{ "ok" : true }`, `{"ok":false}`, `member "ok": true → false`},
		{`{"a<b":"x&y"}`, `{"a<b":"x&y-2"}`, `member "a<b": "x&y" → "x&y-2"`},
	} {
		got, what, err := changeOne([]byte(tt.in))
		if err != nil || string(got) != tt.want || what != tt.what {
			t.Errorf("changeOne(%s) = %s, %q, %v; want %s, %q", tt.in, got, what, err, tt.want, tt.what)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{`{"to":"bob","amount":10}`, `{"to":"bob","amount":12}`},
		{`{"to":"bob"}`, `{"to":"bob-8"}`},
	} {
		if got, _, err := changeBy([]byte(tt.in), 2, "-8"); err != nil || string(got) != tt.want {
			t.Errorf("changeBy(%s, 2, -8) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{`[1]`, `"s"`, `{"a":null,"b":[1]}`, `{"a":1`, `{"a":1} {}`, `not json`, ``} {
		if got, _, err := changeOne([]byte(in)); err == nil {
			t.Errorf("changeOne(%s) = %s, want an error", in, got)
		}
	}
}

// The reordered body means the same JSON (its canonical form is the
// original's) in other bytes.
func TestReorder(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"to":"bob","amount":10}`,
		`{"a":{"y":1,"x":[1,2]},"b":"é","c":null}`,
		`{"only":1}`,
	} {
		got, _, err := reorder([]byte(in))
		if err != nil {
			t.Fatalf("reorder(%s): %v", in, err)
		}
		if string(got) == in || !json.Valid(got) {
			t.Errorf("reorder(%s) = %s: want other, valid bytes", in, got)
		}
		a, _ := idem.CanonicalJSON([]byte(in))
		b, err := idem.CanonicalJSON(got)
		if err != nil || string(a) != string(b) {
			t.Errorf("reorder(%s) = %s: canonical form %s, want %s", in, got, b, a)
		}
	}
	if _, _, err := reorder([]byte(`[1,2]`)); err == nil {
		t.Error("reorder of an array: no error")
	}
}

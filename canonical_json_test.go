package idem_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idem"
)

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"KeyOrder", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"Whitespace", " {\n\t\"a\" : [ 1 , 2 ] \r\n} ", `{"a":[1,2]}`},
		{"Nested", `{"z":{"y":{"b":true,"a":null}},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"z":{"y":{"a":null,"b":true}}}`},
		{"UnicodeEscape", `{"name":"Jos\u00e9"}`, `{"name":"José"}`},
		{"UnicodeEscapeInKey", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"SurrogatePair", `"\ud83d\ude00"`, `"😀"`},
		{"EscapedSolidus", `"a\/b"`, `"a/b"`},
		{"ControlEscapes", `"a\nb\t\u0001"`, `"a\u000ab\u0009\u0001"`},
		{"QuoteAndBackslash", `"\"\\"`, `"\"\\"`},
		{"NumbersKeepLiteral", `[1, 1.0, 1e0, -0, 0.10]`, `[1,1.0,1e0,-0,0.10]`},
		{"BigNumber", `123456789012345678901234567890`, `123456789012345678901234567890`},
		{"EmptyContainers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
		{"Scalars", `true`, `true`},
		{"KeysByteOrder", `{"é":1,"z":2,"Z":3}`, `{"Z":3,"z":2,"é":1}`},
		{"HTMLNotEscaped", `"<&>"`, `"<&>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := idem.CanonicalJSON([]byte(tt.in))
			if err != nil || string(got) != tt.want {
				t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in string }{
		{"DuplicateKey", `{"a":1,"a":2}`},
		{"DuplicateKeySameValue", `{"a":1,"a":1}`},
		{"DuplicateKeyViaEscape", `{"a":1,"\u0061":1}`},
		{"DuplicateNested", `{"x":[{"k":1,"k":2}]}`},
		{"Invalid", `{"a":}`},
		{"Trailing", `{"a":1} {}`},
		{"Empty", ``},
		{"InvalidUTF8", "\"\xff\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := idem.CanonicalJSON([]byte(tt.in))
			if !errors.Is(err, idem.ErrNotCanonicalizable) {
				t.Errorf("CanonicalJSON(%q) = %s, %v; want ErrNotCanonicalizable", tt.in, got, err)
			}
		})
	}
}

func FuzzCanonicalJSONIsStable(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,{"d":"\u00e9"}]}`, `[]`, `"x"`, `1.5e3`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := idem.CanonicalJSON(doc)
		if err != nil {
			return
		}
		again, err := idem.CanonicalJSON(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("canonical form is not a fixed point: %s -> %s, %v", c, again, err)
		}
	})
}

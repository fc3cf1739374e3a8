package idemclient

import (
	"testing"

	"github.com/idemkit/idem"
)

// TestHeaderValue checks that every valid key, whatever its characters,
// reaches the server unchanged (rule K3): bare when it is a token, an
// sf-string otherwise.
func TestHeaderValue(t *testing.T) {
	t.Parallel()
	tests := []struct{ key, want string }{
		{"abc", "abc"},
		{"0190b6f2-7c1e-7a3b-8c4d-5e6f7a8b9c0d", "0190b6f2-7c1e-7a3b-8c4d-5e6f7a8b9c0d"},
		{"a:b/c+d=", "a:b/c+d="},
		{`a"b`, `"a\"b"`},
		{`a\b`, `"a\\b"`},
		{"a,b", `"a,b"`},
		{"a;b", `"a;b"`},
		{"?1", `"?1"`},
		{":YWJj:", `":YWJj:"`},
		{"@1", `"@1"`},
		{"(a)", `"(a)"`},
	}
	for _, tt := range tests {
		got := headerValue(tt.key, false)
		if got != tt.want {
			t.Errorf("headerValue(%q): got %q, want %q", tt.key, got, tt.want)
		}
		if k, err := idem.ParseKey(got); err != nil || k != tt.key {
			t.Errorf("ParseKey(%q): got %q, %v; want %q", got, k, err, tt.key)
		}
	}
	// Every visible ASCII character survives the round trip, bare or
	// quoted.
	for c := byte(0x21); c <= 0x7e; c++ {
		key := "k" + string(c) + "k"
		for _, quote := range []bool{false, true} {
			if k, err := idem.ParseKey(headerValue(key, quote)); err != nil || k != key {
				t.Errorf("ParseKey(headerValue(%q, %v)): got %q, %v", key, quote, k, err)
			}
		}
	}
	if got, want := headerValue("abc", true), `"abc"`; got != want {
		t.Errorf("quoted: got %q, want %q", got, want)
	}
}

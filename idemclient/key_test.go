package idemclient

import (
	"regexp"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

func TestRandomKey(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := make(map[string]bool)
	for range 1000 {
		k := RandomKey()
		if !re.MatchString(k) {
			t.Fatalf("got %q, want 32 lowercase hex characters", k)
		}
		if seen[k] {
			t.Fatalf("got %q twice", k)
		}
		seen[k] = true
		if got, err := idem.ParseKey(headerValue(k, false)); err != nil || got != k {
			t.Fatalf("ParseKey(headerValue(%q)): got %q, %v; want the key", k, got, err)
		}
	}
}

func TestUUIDv7Key(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	at := time.Date(2030, 1, 2, 3, 4, 5, 678e6, time.UTC)
	k := uuidV7(at)
	if !re.MatchString(k) {
		t.Fatalf("got %q, want a version 7 UUID", k)
	}
	// The first 48 bits are the Unix time in milliseconds.
	var ms int64
	for _, c := range k[:8] + k[9:13] {
		ms = ms<<4 | int64(hexVal(c))
	}
	if got, want := ms, at.UnixMilli(); got != want {
		t.Errorf("timestamp: got %d, want %d", got, want)
	}
	if a, b := uuidV7(at), uuidV7(at.Add(time.Millisecond)); a >= b {
		t.Errorf("got %q >= %q, want keys ordered by time", a, b)
	}
	if k := UUIDv7Key(); !re.MatchString(k) {
		t.Errorf("UUIDv7Key: got %q, want a version 7 UUID", k)
	}
	if got, err := idem.ParseKey(headerValue(k, false)); err != nil || got != k {
		t.Errorf("ParseKey(headerValue(%q)): got %q, %v; want the key", k, got, err)
	}
}

func hexVal(c rune) int {
	if c >= 'a' {
		return int(c-'a') + 10
	}
	return int(c - '0')
}

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

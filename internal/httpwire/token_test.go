package httpwire

import (
	"strings"
	"testing"
)

func TestIsToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		want bool
	}{
		{"POST", true},
		{"Idempotency-Key", true},
		{"X-Request-Key", true},
		{"!#$%&'*+-.^_`|~09azAZ", true},
		{"", false},
		{"PO ST", false},
		{"Bad Header:", false},
		{"a\tb", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := IsToken(tt.s); got != tt.want {
			t.Errorf("IsToken(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
	// Every byte: only tchars make a one-byte token.
	const tchars = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	for c := 0; c < 256; c++ {
		want := strings.IndexByte(tchars, byte(c)) >= 0
		if got := IsToken(string([]byte{byte(c)})); got != want {
			t.Errorf("IsToken(0x%02x) = %v, want %v", c, got, want)
		}
	}
}

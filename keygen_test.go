package idem

import (
	"regexp"
	"testing"
	"time"
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
		if got, err := ParseKey(FormatKey(k)); err != nil || got != k {
			t.Fatalf("ParseKey(FormatKey(%q)): got %q, %v; want the key", k, got, err)
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
	if got, err := ParseKey(FormatKey(k)); err != nil || got != k {
		t.Errorf("ParseKey(FormatKey(%q)): got %q, %v; want the key", k, got, err)
	}
}

func hexVal(c rune) int {
	if c >= 'a' {
		return int(c-'a') + 10
	}
	return int(c - '0')
}

package idem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idem"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", idem.MaxKeyLen)
	tests := []struct {
		name, field, want string
		ok                bool
	}{
		{"BareToken", "abc", "abc", true},
		{"SfString", `"abc"`, "abc", true},
		{"UUID", "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{"SurroundingSpace", "  abc\t", "abc", true},
		{"QuotedEscapes", `"a\"b\\c"`, `a"b\c`, true},
		{"QuotedBase64", `"YWJj+/=="`, "YWJj+/==", true},
		{"BareBase64", "YWJj+/==", "YWJj+/==", true},
		{"MaxLength", long, long, true},
		{"MaxLengthQuoted", `"` + long + `"`, long, true},
		{"Empty", "", "", false},
		{"OnlySpaces", "   ", "", false},
		{"EmptyQuoted", `""`, "", false},
		{"TooLong", long + "a", "", false},
		{"TooLongQuoted", `"` + long + `a"`, "", false},
		{"ListBare", "a, b", "", false},
		{"ListQuoted", `"a", "b"`, "", false},
		{"Parameter", `"a";x=1`, "", false},
		{"BareParameter", "a;x=1", "", false},
		{"Unterminated", `"abc`, "", false},
		{"TrailingText", `"abc"def`, "", false},
		{"BadEscape", `"a\nb"`, "", false},
		{"EscapeAtEnd", `"abc\`, "", false},
		{"SpaceInside", "a b", "", false},
		{"SpaceInsideQuoted", `"a b"`, "", false},
		{"ControlChar", "a\x01b", "", false},
		{"DEL", "a\x7fb", "", false},
		{"NonASCII", "chave-é", "", false},
		{"NonASCIIQuoted", `"é"`, "", false},
		{"QuoteInBare", `a"b`, "", false},
		{"BackslashInBare", `a\b`, "", false},
		{"SfBoolean", "?1", "", false},
		{"SfByteSequence", ":YWJj:", "", false},
		{"SfDate", "@1700000000", "", false},
		{"SfInnerList", "(a b)", "", false},
		{"QuotedMayStartWithColon", `":YWJj:"`, ":YWJj:", true},
		{"Integer", "12345", "12345", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := idem.ParseKey(tt.field)
			if tt.ok {
				if err != nil || got != tt.want {
					t.Errorf("ParseKey(%q) = %q, %v; want %q, nil", tt.field, got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, idem.ErrInvalidKey) {
				t.Errorf("ParseKey(%q) = %q, %v; want ErrInvalidKey", tt.field, got, err)
			}
		})
	}
}

func TestParseKeyQuotedAndBareNameTheSameKey(t *testing.T) {
	t.Parallel()
	a, err1 := idem.ParseKey(`"order-42"`)
	b, err2 := idem.ParseKey(`order-42`)
	if err1 != nil || err2 != nil || a != b {
		t.Errorf(`ParseKey("\"order-42\"") = %q, %v; ParseKey("order-42") = %q, %v; want the same key`, a, err1, b, err2)
	}
}

func TestValidateKey(t *testing.T) {
	t.Parallel()
	for c := 0; c < 256; c++ {
		err := idem.ValidateKey(string([]byte{byte(c)}))
		visible := c >= 0x21 && c <= 0x7e
		if visible != (err == nil) {
			t.Errorf("ValidateKey(0x%02x) = %v; visible ASCII = %v", c, err, visible)
		}
	}
}

// TestFormatKey checks the one quoting rule clients and servers share: the
// value FormatKey writes is the bare key whenever ParseKey reads that back
// unchanged, an sf-string otherwise, and ParseKey always returns the key.
func TestFormatKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("z", idem.MaxKeyLen)
	tests := []struct{ name, key, want string }{
		{"Hex", "0123456789abcdef", "0123456789abcdef"},
		{"UUID", "0190b6f2-7c1e-7a3b-8c4d-5e6f7a8b9c0d", "0190b6f2-7c1e-7a3b-8c4d-5e6f7a8b9c0d"},
		{"Integer", "12345", "12345"},
		{"Base64", "YWJj+/==", "YWJj+/=="},
		{"ColonInside", "a:b/c+d=", "a:b/c+d="},
		{"OtherStartsInside", "a?@(b", "a?@(b"},
		{"MaxLength", long, long},
		{"StartsWithQuestionMark", "?1", `"?1"`},
		{"StartsWithColon", ":YWJj:", `":YWJj:"`},
		{"StartsWithAt", "@1700000000", `"@1700000000"`},
		{"StartsWithParen", "(a)", `"(a)"`},
		{"Quote", `a"b`, `"a\"b"`},
		{"Backslash", `a\b`, `"a\\b"`},
		{"Comma", "a,b", `"a,b"`},
		{"Semicolon", "a;b", `"a;b"`},
		{"EscapesOnly", `"\`, `"\"\\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := idem.FormatKey(tt.key); got != tt.want {
				t.Errorf("FormatKey(%q) = %q, want %q", tt.key, got, tt.want)
			}
			checkFormatKey(t, tt.key)
		})
	}
	// Every visible ASCII character, at the start, inside and at the end.
	for c := byte(0x21); c <= 0x7e; c++ {
		for _, key := range []string{string(c), string(c) + "k", "k" + string(c), "k" + string(c) + "k"} {
			checkFormatKey(t, key)
		}
	}
}

func TestQuoteKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ key, want string }{
		{"abc", `"abc"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"?1", `"?1"`},
	} {
		if got := idem.QuoteKey(tt.key); got != tt.want {
			t.Errorf("QuoteKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
		if got, err := idem.ParseKey(idem.QuoteKey(tt.key)); err != nil || got != tt.key {
			t.Errorf("ParseKey(QuoteKey(%q)) = %q, %v; want the key", tt.key, got, err)
		}
	}
}

// FuzzFormatKey checks, for every valid key, that ParseKey reads back what
// FormatKey and QuoteKey write, and that FormatKey quotes only keys that
// ParseKey would not read back unchanged when bare.
func FuzzFormatKey(f *testing.F) {
	for _, k := range []string{"abc", "?1", ":x:", "@1", "(a b)", `a"b`, `\`, "a,b", "a;b=1", "0190b6f2-7c1e-7a3b-8c4d-5e6f7a8b9c0d"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if idem.ValidateKey(key) != nil {
			if got, err := idem.ParseKey(idem.FormatKey(key)); err == nil && got == key {
				t.Fatalf("ParseKey(FormatKey(%q)) = %q, nil; want an error for an invalid key", key, got)
			}
			return
		}
		checkFormatKey(t, key)
	})
}

// checkFormatKey checks FormatKey and QuoteKey for one valid key.
func checkFormatKey(t *testing.T, key string) {
	t.Helper()
	field := idem.FormatKey(key)
	if got, err := idem.ParseKey(field); err != nil || got != key {
		t.Fatalf("ParseKey(FormatKey(%q) = %q) = %q, %v; want the key", key, field, got, err)
	}
	if got, err := idem.ParseKey(idem.QuoteKey(key)); err != nil || got != key {
		t.Fatalf("ParseKey(QuoteKey(%q)) = %q, %v; want the key", key, got, err)
	}
	bare, err := idem.ParseKey(key)
	bareOK := err == nil && bare == key
	if quoted := field != key; quoted == bareOK {
		t.Fatalf("FormatKey(%q) = %q, but ParseKey of the bare key gives %q, %v: want bare exactly when that reads back the key", key, field, bare, err)
	}
}

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

package idem

import (
	"fmt"
	"strings"
)

// MaxKeyLen is the longest key accepted, in bytes.
const MaxKeyLen = 255

// ValidateKey reports whether key is 1 to MaxKeyLen visible ASCII characters
// (0x21 to 0x7E). The error matches ErrInvalidKey.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d characters, the limit is %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: byte 0x%02x at position %d is not visible ASCII", ErrInvalidKey, c, i)
		}
	}
	return nil
}

// ParseKey parses one Idempotency-Key field value and returns the key it
// names. Two forms are accepted and name the same key:
//
//   - an RFC 8941 sf-string: "abc" (with \" and \\ as the only escapes);
//   - a bare token: abc, made of visible ASCII other than the characters
//     that carry structure in a field value (DQUOTE, comma, semicolon,
//     backslash). It may start with a digit, so that bare UUIDs and hex
//     keys work, but not with a character that starts another RFC 8941
//     item type: ? (boolean), : (byte sequence), @ (date), ( (inner list).
//
// Leading and trailing spaces and tabs are ignored. A list ("a", "b"), a
// parameter ("a";x=1), an unterminated string and a key that breaks
// ValidateKey are errors matching ErrInvalidKey. A request that carries the
// header twice must be rejected by the caller before ParseKey is reached.
func ParseKey(field string) (string, error) {
	v := strings.Trim(field, " \t")
	if v == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if v[0] != '"' {
		if err := checkBareKey(v); err != nil {
			return "", err
		}
		return v, nil
	}
	var b strings.Builder
	i := 1
	for ; i < len(v); i++ {
		c := v[i]
		if c == '\\' {
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", fmt.Errorf("%w: bad escape in quoted key", ErrInvalidKey)
			}
			b.WriteByte(v[i])
			continue
		}
		if c == '"' {
			break
		}
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("%w: byte 0x%02x in quoted key", ErrInvalidKey, c)
		}
		b.WriteByte(c)
	}
	if i >= len(v) {
		return "", fmt.Errorf("%w: unterminated quoted key", ErrInvalidKey)
	}
	if rest := strings.TrimLeft(v[i+1:], " \t"); rest != "" {
		switch rest[0] {
		case ',':
			return "", fmt.Errorf("%w: a list is not a key", ErrInvalidKey)
		case ';':
			return "", fmt.Errorf("%w: parameters are not allowed", ErrInvalidKey)
		default:
			return "", fmt.Errorf("%w: text after the quoted key", ErrInvalidKey)
		}
	}
	key := b.String()
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// FormatKey returns the Idempotency-Key field value that carries key: the
// key itself when ParseKey reads it back unchanged as a bare token, and
// QuoteKey(key) otherwise (a key holding DQUOTE, comma, semicolon or
// backslash, or starting with ?, :, @ or (). For every key that passes
// ValidateKey, ParseKey(FormatKey(key)) returns key. Clients and servers
// that use FormatKey and ParseKey therefore share one rule for when a key
// must be quoted. FormatKey does not validate key: a key that fails
// ValidateKey yields a value that ParseKey rejects.
func FormatKey(key string) string {
	if key != "" && checkBareKey(key) == nil {
		return key
	}
	return QuoteKey(key)
}

// QuoteKey returns key as an RFC 8941 sf-string: between double quotes,
// with DQUOTE and backslash escaped by a backslash. It is the form the IETF
// idempotency-key draft specifies; ParseKey reads it back to key.
func QuoteKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}

// checkBareKey is the rule for a bare key, shared by ParseKey and
// FormatKey: a valid key that neither starts with a character that opens
// another RFC 8941 item type nor holds one that carries structure in a
// field value. v is not empty.
func checkBareKey(v string) error {
	switch v[0] {
	case '?', ':', '@', '(':
		return fmt.Errorf("%w: %q starts another structured-field type; quote the key", ErrInvalidKey, v[0])
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == ',':
			return fmt.Errorf("%w: a list is not a key", ErrInvalidKey)
		case c == ';':
			return fmt.Errorf("%w: parameters are not allowed", ErrInvalidKey)
		case c == '"' || c == '\\':
			return fmt.Errorf("%w: %q is not allowed in a bare key; quote the key", ErrInvalidKey, c)
		}
	}
	return ValidateKey(v)
}

package canonjson

import (
	"bytes"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON strings: checking them (first pass), decoding their escapes and
// writing their runes as the canonical form does.

// plain marks the bytes that stand for themselves in a JSON string and in
// its canonical form: printable ASCII but " and \.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 0x80; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// str checks the string at doc[i:] and returns the offset just after it,
// the length of its canonical form and whether it has escapes.
func (d *Doc) str(i int) (end, n int, escaped bool, err error) {
	doc := d.doc
	j := i + 1
	n = 2
	for {
		k := j
		for k < len(doc) && plain[doc[k]] {
			k++
		}
		n += k - j
		if j = k; j >= len(doc) {
			return j, n, escaped, d.syntaxError(j)
		}
		switch b := doc[j]; {
		case b == '"':
			return j + 1, n, escaped, nil
		case b == '\\':
			r, size := unescape(doc[j:])
			if size == 0 {
				return j, n, escaped, fmt.Errorf("%w: invalid JSON: invalid escape at offset %d", ErrNotCanonicalizable, j)
			}
			escaped = true
			n += canonRuneLen(r)
			j += size
		case b < 0x20:
			return j, n, escaped, fmt.Errorf("%w: invalid JSON: control character in a string at offset %d", ErrNotCanonicalizable, j)
		default:
			r, size := utf8.DecodeRune(doc[j:])
			if r == utf8.RuneError && size == 1 {
				return j, n, escaped, fmt.Errorf("%w: invalid UTF-8 at offset %d", ErrNotCanonicalizable, j)
			}
			n += size
			j += size
		}
	}
}

// unescape decodes the escape sequence at the start of s (s[0] == '\\') as
// encoding/json does: an unpaired surrogate stands for U+FFFD. It returns
// the rune and the length of the sequence, or a zero length if the
// sequence is not valid JSON.
func unescape(s []byte) (r rune, n int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(s[2:])
		if r < 0 {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(s) >= 8 && s[6] == '\\' && s[7] == 'u' {
			if pair := utf16.DecodeRune(r, hex4(s[8:])); pair != utf8.RuneError {
				return pair, 12
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

// hex4 returns the value of the four hex digits that start s, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, b := range s[:4] {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b -= 'a' - 10
		case 'A' <= b && b <= 'F':
			b -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(b)
	}
	return r
}

// appendUnquoted appends the decoded contents of a checked JSON string
// (without its quotes).
func appendUnquoted(dst, s []byte) []byte {
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:k]...)
		r, n := unescape(s[k:])
		dst = utf8.AppendRune(dst, r)
		s = s[k+n:]
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendCanonRune appends r as the canonical form writes it inside a string.
func appendCanonRune(out []byte, r rune) []byte {
	switch {
	case r == '"' || r == '\\':
		return append(out, '\\', byte(r))
	case r < 0x20:
		return append(out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
	}
	return utf8.AppendRune(out, r)
}

// canonRuneLen is the length of appendCanonRune's output.
func canonRuneLen(r rune) int {
	switch {
	case r == '"' || r == '\\':
		return 2
	case r < 0x20:
		return 6
	}
	return utf8.RuneLen(r)
}

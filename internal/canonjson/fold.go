package canonjson

import (
	"unicode"
	"unicode/utf8"
)

// foldCompare orders member names as a case-insensitive decoder tells them
// apart, and returns 0 for two names that such a decoder could match to one
// field. It compares them rune by rune after foldRune, skipping '_' and
// '-'. That is at least as broad as encoding/json (simple case folding, as
// strings.EqualFold), encoding/json/v2 with case:ignore (which also ignores
// '_' and '-') and decoders that match through strings.ToLower or ToUpper.
func foldCompare(a, b []byte) int {
	for {
		ra, na := nextFolded(a)
		rb, nb := nextFolded(b)
		switch {
		case na == 0 && nb == 0:
			return 0
		case na == 0:
			return -1
		case nb == 0:
			return 1
		case ra != rb:
			if ra < rb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
}

// nextFolded returns the folded first rune of s that is not '_' or '-', and
// how many bytes of s it took; 0 when there is none.
func nextFolded(s []byte) (rune, int) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '_' || c == '-':
				continue
			case 'a' <= c && c <= 'z':
				c -= 'a' - 'A'
			}
			return rune(c), i
		}
		r, n := utf8.DecodeRune(s[i:])
		return foldRune(r), i + n
	}
	return 0, 0
}

// foldRune maps every rune of a case class to one rune of it: the smallest
// rune of the simple-folding orbit of ToLower(ToUpper(r)). Two runes that
// unicode.SimpleFold, ToUpper, ToLower or ToTitle relate map to the same
// rune (a test checks every rune), so the dotted İ and the dotless ı meet
// I, and the Kelvin sign meets K. An ASCII letter maps to its upper case.
func foldRune(r rune) rune {
	r = unicode.ToLower(unicode.ToUpper(r))
	for {
		next := unicode.SimpleFold(r)
		if next <= r {
			return next
		}
		r = next
	}
}

package idem

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Guard hands stores only values that every store can keep, so that a
// request can never fail at the store, on every retry, because of what the
// client or the handler chose: a scope of any length and bytes, a
// fingerprint with invalid UTF-8, a response header with a NUL byte.

const (
	// maxStoredScope is the longest scope stored as it is. PostgreSQL
	// refuses a btree index entry larger than about a third of a page
	// (2704 bytes with 8 KiB pages); the primary key (scope, key) with a
	// key of up to 255 bytes and a scope of up to 255 stays near 520
	// bytes, far below. It is also the key's own bound, which fits a
	// VARCHAR(255) column in any database.
	maxStoredScope = 255

	// digestPrefix starts the stored form of a value that is not stored as
	// it is. No value is stored as it is if it starts with the prefix, so
	// that no scope chosen by a client can equal another one's digest.
	digestPrefix = "idem:sha256:"
)

// StoredScope returns the form in which Guard stores a request's scope,
// and in which tools must look a record up (Inspector.Lookup takes it).
// A scope of at most 255 bytes of valid UTF-8 without control characters
// is stored as it is, unless it starts with "idem:sha256:". Any other
// scope, such as a long or binary credential, is stored as "idem:sha256:"
// and the hex SHA-256 of its bytes: 76 bytes, always valid, distinct for
// distinct scopes. Apply it to the scope a request carried, never to a
// stored form.
func StoredScope(scope string) string {
	return storedForm(scope, maxStoredScope)
}

// storedFingerprint is the stored form of a Request.Fingerprint: a
// fingerprint from NewFingerprint is kept as it is; one that is not valid
// UTF-8 or has control characters is stored as a digest. Fingerprints are
// not indexed, so their length is not bounded.
func storedFingerprint(fp string) string {
	return storedForm(fp, math.MaxInt)
}

func storedForm(s string, maxLen int) string {
	if len(s) <= maxLen && !strings.HasPrefix(s, digestPrefix) && utf8.ValidString(s) && !hasControl(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return digestPrefix + hex.EncodeToString(sum[:])
}

// hasControl reports whether valid UTF-8 s holds a control character (C0,
// DEL or C1), NUL included.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// storableResult returns res as Guard records it: header entries whose
// name is not valid UTF-8 or has a control character are dropped (net/http
// never sends such a name), and NUL, CR and LF in header values become
// spaces (what RFC 9110, section 5.5, lets a recipient do, and net/http
// does to CR and LF when it writes them). A NUL cannot be stored by
// PostgreSQL in text or jsonb. A Status that does not fit in 32 bits is an
// error. res's own header map is not modified.
func storableResult(res Result) (Result, error) {
	if res.Status < math.MinInt32 || res.Status > math.MaxInt32 {
		return res, fmt.Errorf("idem: Result.Status %d does not fit in 32 bits", res.Status)
	}
	clean := true
	for name, values := range res.Header {
		if !storableHeaderName(name) || slices.ContainsFunc(values, unstorableValue) {
			clean = false
			break
		}
	}
	if clean {
		return res, nil
	}
	h := make(map[string][]string, len(res.Header))
	for name, values := range res.Header {
		if !storableHeaderName(name) {
			continue
		}
		out := make([]string, len(values))
		for i, v := range values {
			out[i] = strings.ToValidUTF8(headerBreaks.Replace(v), "\uFFFD")
		}
		h[name] = out
	}
	res.Header = h
	return res, nil
}

func storableHeaderName(name string) bool {
	return utf8.ValidString(name) && !hasControl(name)
}

var headerBreaks = strings.NewReplacer("\x00", " ", "\r", " ", "\n", " ")

// unstorableValue reports whether a header value must be changed to be
// stored: it holds NUL, CR or LF, or is not valid UTF-8 (stores keep header
// values as text, and would change those bytes themselves).
func unstorableValue(v string) bool {
	return strings.ContainsAny(v, "\x00\r\n") || !utf8.ValidString(v)
}

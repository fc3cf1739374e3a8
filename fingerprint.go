package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// FingerprintInput is what a request's fingerprint is computed from.
type FingerprintInput struct {
	// Method is the request method, for example "POST".
	Method string

	// Route identifies the operation: a route pattern such as
	// "POST /transfers" or a path. Two requests to different routes never
	// share a fingerprint.
	Route string

	// Body is the request body.
	Body []byte

	// JSON asks for the body to be compared in its canonical JSON form
	// (see CanonicalJSON), so that member order and whitespace do not
	// count. A body that has no canonical form is hashed as raw bytes.
	JSON bool

	// Extra holds further values that must match on a retry, such as
	// selected header values. Order matters.
	Extra []string
}

// NewFingerprint returns the fingerprint of a request: a SHA-256 over the
// method, the route, the extra values and the body (canonical JSON when
// in.JSON is set and the body has a canonical form, raw bytes otherwise),
// each length-prefixed so that no two inputs run together. The result is a
// 67-character string starting with "v1:"; the prefix names the version of
// this computation so that a later change cannot silently match old records.
func NewFingerprint(in FingerprintInput) string {
	h := sha256.New()
	field(h, in.Method)
	field(h, in.Route)
	for _, e := range in.Extra {
		field(h, "x")
		field(h, e)
	}
	body, kind := in.Body, "raw"
	if in.JSON {
		if c, err := CanonicalJSON(in.Body); err == nil {
			body, kind = c, "json"
		}
	}
	field(h, kind)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(body)))
	h.Write(n[:])
	h.Write(body)
	return "v1:" + hex.EncodeToString(h.Sum(nil))
}

func field(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

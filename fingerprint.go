package idem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/idemkit/idem/internal/canonjson"
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
	head := make([]byte, 0, 64+len(in.Method)+len(in.Route)+32*len(in.Extra))
	head = appendField(head, in.Method)
	head = appendField(head, in.Route)
	for _, e := range in.Extra {
		head = appendField(head, "x")
		head = appendField(head, e)
	}
	// The canonical form is hashed as it is written, never held whole.
	var doc *canonjson.Doc
	if in.JSON {
		doc, _ = canonjson.Parse(in.Body)
	}
	if doc != nil {
		head = appendField(head, "json")
		h.Write(binary.BigEndian.AppendUint64(head, uint64(doc.Size())))
		_, _ = doc.WriteTo(h) // a hash never fails
	} else {
		head = appendField(head, "raw")
		h.Write(binary.BigEndian.AppendUint64(head, uint64(len(in.Body))))
		h.Write(in.Body)
	}
	var sum [sha256.Size]byte
	var out [3 + 2*sha256.Size]byte
	copy(out[:], "v1:")
	hex.Encode(out[3:], h.Sum(sum[:0]))
	return string(out[:])
}

// appendField appends s prefixed by its length.
func appendField(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...)
}

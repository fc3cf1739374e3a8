// Package canonjson computes the canonical form of a JSON document, the form
// idem's fingerprints hash (idem.CanonicalJSON documents it for users): no
// insignificant whitespace; object members sorted by the bytes of their
// UTF-8 names; strings re-encoded one way (only ", \ and control characters
// escaped, as \", \\ and \u00XX; an unpaired surrogate escape stands for
// U+FFFD); numbers as written. A document has no canonical form if it is not
// valid JSON or UTF-8, if an object has two member names that are equal, or
// equal once case is folded and '_' and '-' are dropped (a case-insensitive
// decoder would read whichever comes last), if it nests deeper than
// encoding/json accepts or if it is over 2 GiB.
//
// The work is two passes over the bytes and no decoded tree: Parse checks
// the document and records where the members of each object that is out of
// order start, sorted; Doc.WriteTo then writes the form from the document
// and those records.
package canonjson

import (
	"errors"
	"io"
)

// ErrNotCanonicalizable is matched by every error of Parse and Canonical:
// the document has no canonical form.
var ErrNotCanonicalizable = errors.New("idem: JSON has no canonical form")

var _ io.WriterTo = (*Doc)(nil)

// Doc is a JSON document that has a canonical form, with what Parse
// learned about it to write that form. Parse makes one.
type Doc struct {
	doc   []byte
	size  int // length of the canonical form
	depth int

	open    []member // members of the objects being parsed, innermost last
	sorted  []uint32 // offsets of the members of objects, sorted per object
	objects []object // objects not in canonical order, by start (see object)
	holes   int      // entries of objects left empty
	names   []byte   // decoded names with escapes of the members in open
	scratch []int32  // for the case-folding check

	// Room for small documents, so that they need no allocation.
	openBuf    [16]member
	sortedBuf  [16]uint32
	objectsBuf [4]object
}

// Parse checks doc and returns it ready to be written in canonical form, or
// an error that matches ErrNotCanonicalizable. The Doc reads doc again when
// it writes: doc must not change while the Doc is in use.
func Parse(doc []byte) (*Doc, error) {
	d := new(Doc)
	if err := d.parse(doc); err != nil {
		return nil, err
	}
	return d, nil
}

// Size returns the length in bytes of d's canonical form.
func (d *Doc) Size() int { return d.size }

// WriteTo writes d's canonical form to w through a buffer of about 16 KiB,
// never holding all of it, and returns the number of bytes written. After w
// fails it writes nothing more and returns w's error.
func (d *Doc) WriteTo(w io.Writer) (int64, error) {
	// Small appends go past flushSize before the next check: leave room.
	e := emitter{d: d, out: make([]byte, 0, min(2*flushSize, d.size)), w: w}
	e.value(0)
	e.flush()
	return e.n, e.err
}

// Canonical returns the canonical form of doc, or an error that matches
// ErrNotCanonicalizable.
func Canonical(doc []byte) ([]byte, error) {
	var d Doc
	if err := d.parse(doc); err != nil {
		return nil, err
	}
	e := emitter{d: &d, out: make([]byte, 0, d.size)}
	e.value(0)
	return e.out, nil
}

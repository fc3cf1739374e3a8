package idem

import "github.com/idemkit/idem/internal/canonjson"

// ErrNotCanonicalizable is returned by CanonicalJSON for input that has no
// canonical form: invalid JSON, invalid UTF-8, or an object with two member
// names that a decoder could take for the same field.
var ErrNotCanonicalizable = canonjson.ErrNotCanonicalizable

// CanonicalJSON returns the canonical form of a JSON document, the form
// fingerprints are computed on. Two documents with the same canonical form
// mean the same thing to any reasonable decoder:
//
//   - insignificant whitespace is removed;
//   - object members are sorted by name (byte order of the UTF-8 name);
//   - strings are decoded and re-encoded one way: only ", \ and control
//     characters are escaped (as \", \\ and \u00XX), everything else is
//     written as UTF-8, so "\u00e9" and "é" are the same string (an
//     unpaired surrogate escape stands for U+FFFD, as in encoding/json);
//   - numbers keep their literal text: 1, 1.0 and 1e0 are different, because
//     a handler may decode them differently (1.0 does not fit an int field).
//
// An object whose member order could change what a decoder reads has no
// canonical form: two member names that are equal, or equal once case is
// folded and underscores and dashes are dropped. encoding/json matches
// struct fields case-insensitively and keeps the last value, and
// encoding/json/v2 with case:ignore also ignores '_' and '-', so
// {"amount":5,"Amount":7} and {"Amount":7,"amount":5} are read differently
// and must not share a form. Invalid JSON (including anything after the
// document) and invalid UTF-8 are rejected too, and so is nesting deeper
// than encoding/json accepts (10000 levels) and a document over 2 GiB.
// All these errors match ErrNotCanonicalizable.
//
// The work is two passes over the bytes, with memory for the members of
// objects that are not already in order, and no decoded tree.
func CanonicalJSON(doc []byte) ([]byte, error) {
	return canonjson.Canonical(doc)
}

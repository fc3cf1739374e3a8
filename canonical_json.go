package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrNotCanonicalizable is returned by CanonicalJSON for input that has no
// canonical form: invalid JSON, invalid UTF-8, or an object with a duplicate
// member name.
var ErrNotCanonicalizable = errors.New("idem: JSON has no canonical form")

// CanonicalJSON returns the canonical form of a JSON document, the form
// fingerprints are computed on. Two documents with the same canonical form
// mean the same thing to any reasonable decoder:
//
//   - insignificant whitespace is removed;
//   - object members are sorted by name (byte order of the UTF-8 name);
//   - strings are decoded and re-encoded one way: only ", \ and control
//     characters are escaped (as \", \\ and \u00XX), everything else is
//     written as UTF-8, so "\u00e9" and "é" are the same string;
//   - numbers keep their literal text: 1, 1.0 and 1e0 are different, because
//     a handler may decode them differently (1.0 does not fit an int field).
//
// An object with a duplicate member name is rejected, since decoders
// disagree on which value wins. Invalid JSON and invalid UTF-8 are rejected
// too. All these errors match ErrNotCanonicalizable.
func CanonicalJSON(doc []byte) ([]byte, error) {
	if !utf8.Valid(doc) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrNotCanonicalizable)
	}
	if !json.Valid(doc) {
		return nil, fmt.Errorf("%w: invalid JSON", ErrNotCanonicalizable)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(doc))
	if err := canonValue(dec, &out); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the document", ErrNotCanonicalizable)
	}
	return out.Bytes(), nil
}

func canonValue(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return canonArray(dec, out)
		}
		return canonObject(dec, out)
	case string:
		writeCanonString(out, t)
	case json.Number:
		out.WriteString(string(t))
	case bool:
		if t {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	}
	return nil
}

func canonArray(dec *json.Decoder, out *bytes.Buffer) error {
	out.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := canonValue(dec, out); err != nil {
			return err
		}
	}
	out.WriteByte(']')
	_, err := dec.Token() // ]
	return err
}

type member struct {
	name  string
	value []byte
}

func canonObject(dec *json.Decoder, out *bytes.Buffer) error {
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
		}
		name, _ := tok.(string)
		var v bytes.Buffer
		if err := canonValue(dec, &v); err != nil {
			return err
		}
		members = append(members, member{name, v.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // }
		return err
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].name == m.name {
				return fmt.Errorf("%w: duplicate member %q", ErrNotCanonicalizable, m.name)
			}
			out.WriteByte(',')
		}
		writeCanonString(out, m.name)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

const hexDigits = "0123456789abcdef"

func writeCanonString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			out.WriteByte('\\')
			out.WriteByte(c)
		case c < 0x20:
			out.WriteString(`\u00`)
			out.WriteByte(hexDigits[c>>4])
			out.WriteByte(hexDigits[c&0xf])
		default:
			out.WriteByte(c)
		}
	}
	out.WriteByte('"')
}

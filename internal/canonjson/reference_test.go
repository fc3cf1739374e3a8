package canonjson

// This file keeps the canonicaliser as it was before the single-pass
// rewrite, for tests only: the new one must give byte for byte the same
// canonical form for every document this one accepted (minus those whose
// member names collide under case folding, which it wrongly accepted), so
// that fingerprints already stored never change.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// referenceCanonicalJSON is Canonical (then idem.CanonicalJSON) before the
// rewrite.
func referenceCanonicalJSON(doc []byte) ([]byte, error) {
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
	if err := refValue(dec, &out); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the document", ErrNotCanonicalizable)
	}
	return out.Bytes(), nil
}

func refValue(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return refArray(dec, out)
		}
		return refObject(dec, out)
	case string:
		refWriteString(out, t)
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

func refArray(dec *json.Decoder, out *bytes.Buffer) error {
	out.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := refValue(dec, out); err != nil {
			return err
		}
	}
	out.WriteByte(']')
	_, err := dec.Token() // ]
	return err
}

type refMember struct {
	name  string
	value []byte
}

func refObject(dec *json.Decoder, out *bytes.Buffer) error {
	var members []refMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
		}
		name, _ := tok.(string)
		var v bytes.Buffer
		if err := refValue(dec, &v); err != nil {
			return err
		}
		members = append(members, refMember{name, v.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // }
		return err
	}
	slices.SortFunc(members, func(a, b refMember) int { return strings.Compare(a.name, b.name) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].name == m.name {
				return fmt.Errorf("%w: duplicate member %q", ErrNotCanonicalizable, m.name)
			}
			out.WriteByte(',')
		}
		refWriteString(out, m.name)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

const refHexDigits = "0123456789abcdef"

func refWriteString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			out.WriteByte('\\')
			out.WriteByte(c)
		case c < 0x20:
			out.WriteString(`\u00`)
			out.WriteByte(refHexDigits[c>>4])
			out.WriteByte(refHexDigits[c&0xf])
		default:
			out.WriteByte(c)
		}
	}
	out.WriteByte('"')
}

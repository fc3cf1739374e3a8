package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// member is one member of a JSON object, its value as written.
type member struct {
	name  string
	value json.RawMessage
}

// objectMembers returns the members of the JSON object doc, in order.
func objectMembers(doc []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("the body is not a JSON object")
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the body is not valid JSON: %w", err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("the body is not valid JSON: %w", err)
		}
		ms = append(ms, member{name, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("the body is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("the body has more than one JSON value")
	}
	return ms, nil
}

func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// encodeObject writes members compactly, in the order given.
func encodeObject(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(quote(m.name))
		b.WriteByte(':')
		_ = json.Compact(&b, m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// changeOne returns body with one member's value changed, for rule 3: the
// first number plus one, else the first string with "-2" appended, else
// the first boolean negated. It says what it changed.
func changeOne(body []byte) ([]byte, string, error) { return changeBy(body, 1, "-2") }

// changeBy returns body with one member's value changed: the first number
// plus n, else the first string with suffix appended, else the first
// boolean negated. It says what it changed.
func changeBy(body []byte, n int64, suffix string) ([]byte, string, error) {
	ms, err := objectMembers(body)
	if err != nil {
		return nil, "", err
	}
	pick := func(ok func(v string) (string, bool)) ([]byte, string, bool) {
		for i, m := range ms {
			if nv, changed := ok(string(m.value)); changed {
				out := append([]member(nil), ms...)
				out[i].value = json.RawMessage(nv)
				return encodeObject(out), fmt.Sprintf("member %q: %s → %s", m.name, m.value, nv), true
			}
		}
		return nil, "", false
	}
	if b, what, ok := pick(func(v string) (string, bool) {
		if i, err := strconv.ParseInt(v, 10, 64); err == nil && i < 1<<62 {
			return strconv.FormatInt(i+n, 10), true
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil && v != "" && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
			return strconv.FormatFloat(f+float64(n), 'g', -1, 64), true
		}
		return "", false
	}); ok {
		return b, what, nil
	}
	if b, what, ok := pick(func(v string) (string, bool) {
		var s string
		if strings.HasPrefix(v, `"`) && json.Unmarshal([]byte(v), &s) == nil {
			return string(quote(s + suffix)), true
		}
		return "", false
	}); ok {
		return b, what, nil
	}
	if b, what, ok := pick(func(v string) (string, bool) {
		switch v {
		case "true":
			return "false", true
		case "false":
			return "true", true
		}
		return "", false
	}); ok {
		return b, what, nil
	}
	return nil, "", errors.New("the body's object has no number, string or boolean member to change")
}

// reorder returns body with its members in reverse order and other
// whitespace, for rule 4: the same JSON to any decoder, other bytes.
func reorder(body []byte) ([]byte, string, error) {
	ms, err := objectMembers(body)
	if err != nil {
		return nil, "", err
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i := len(ms) - 1; i >= 0; i-- {
		b.WriteString("  ")
		b.Write(quote(ms[i].name))
		b.WriteString(" : ")
		var v bytes.Buffer
		if err := json.Indent(&v, ms[i].value, "  ", "  "); err != nil {
			return nil, "", err
		}
		b.Write(v.Bytes())
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	what := "members reversed, whitespace added"
	if len(ms) < 2 {
		what = "whitespace added (one member: nothing to reorder)"
	}
	return b.Bytes(), what, nil
}

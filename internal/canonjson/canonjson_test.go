package canonjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"github.com/idemkit/idem/internal/canonjson"
	"github.com/idemkit/idem/internal/canonjson/canonjsontest"
)

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"KeyOrder", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"Whitespace", " {\n\t\"a\" : [ 1 , 2 ] \r\n} ", `{"a":[1,2]}`},
		{"Nested", `{"z":{"y":{"b":true,"a":null}},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"z":{"y":{"a":null,"b":true}}}`},
		{"UnicodeEscape", `{"name":"Jos\u00e9"}`, `{"name":"José"}`},
		{"UnicodeEscapeInKey", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"SurrogatePair", `"\ud83d\ude00"`, `"😀"`},
		{"EscapedSolidus", `"a\/b"`, `"a/b"`},
		{"ControlEscapes", `"a\nb\t\u0001"`, `"a\u000ab\u0009\u0001"`},
		{"QuoteAndBackslash", `"\"\\"`, `"\"\\"`},
		{"NumbersKeepLiteral", `[1, 1.0, 1e0, -0, 0.10]`, `[1,1.0,1e0,-0,0.10]`},
		{"BigNumber", `123456789012345678901234567890`, `123456789012345678901234567890`},
		{"EmptyContainers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
		{"Scalars", `true`, `true`},
		{"KeysByteOrder", `{"é":1,"z":2,"Y":3}`, `{"Y":3,"z":2,"é":1}`},
		{"HTMLNotEscaped", `"<&>"`, `"<&>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := canonjson.Canonical([]byte(tt.in))
			if err != nil || string(got) != tt.want {
				t.Errorf("Canonical(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in string }{
		{"DuplicateKey", `{"a":1,"a":2}`},
		{"DuplicateKeySameValue", `{"a":1,"a":1}`},
		{"DuplicateKeyViaEscape", `{"a":1,"\u0061":1}`},
		{"DuplicateNested", `{"x":[{"k":1,"k":2}]}`},
		{"Invalid", `{"a":}`},
		{"Trailing", `{"a":1} {}`},
		{"Empty", ``},
		{"InvalidUTF8", "\"\xff\""},
		{"TrailingBrace", `{"a":1}}`},
		{"TrailingBrackets", `[1]]]]`},
		{"CaseFoldedDuplicate", `{"from":"a","to":"b","amount":5,"Amount":7}`},
		{"CaseFoldedDuplicateEscaped", `{"amount":5,"\u0041mount":7}`},
		{"CaseFoldedDuplicateNested", `{"x":[{"From":"a","from":"b"}]}`},
		{"KelvinSign", "{\"k\":1,\"\u212a\":2}"},
		{"LongS", "{\"s\":1,\"\u017f\":2}"},
		{"DottedCapitalI", "{\"i\":1,\"\u0130\":2}"},
		{"Underscore", `{"from_account":1,"fromAccount":2}`},
		{"Dash", `{"from-account":1,"FROMACCOUNT":2}`},
		{"CaseFoldedDuplicateInLargeObject", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"K":11,"k":12}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := canonjson.Canonical([]byte(tt.in))
			if !errors.Is(err, canonjson.ErrNotCanonicalizable) {
				t.Errorf("Canonical(%q) = %s, %v; want ErrNotCanonicalizable", tt.in, got, err)
			}
		})
	}
}

// failingWriter takes room bytes, then fails every write; it counts the
// writes made after the first failure.
type failingWriter struct {
	room, late int
	failed     bool
}

var errWriterFull = errors.New("writer full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.failed {
		w.late++
	}
	if len(p) <= w.room {
		w.room -= len(p)
		return len(p), nil
	}
	n := w.room
	w.room, w.failed = 0, true
	return n, errWriterFull
}

func TestWriteToStopsAtWriterError(t *testing.T) {
	t.Parallel()
	d, err := canonjson.Parse(canonjsontest.Strings(256 << 10))
	if err != nil {
		t.Fatal(err)
	}
	const room = 100 << 10
	w := &failingWriter{room: room}
	n, err := d.WriteTo(w)
	if n != room || !errors.Is(err, errWriterFull) {
		t.Errorf("WriteTo = %d, %v; want %d, %v", n, err, room, errWriterFull)
	}
	if w.late != 0 {
		t.Errorf("WriteTo wrote %d times after the writer failed, want 0", w.late)
	}
}

func FuzzCanonicalJSONIsStable(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,{"d":"\u00e9"}]}`, `[]`, `"x"`, `1.5e3`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := canonjson.Canonical(doc)
		if err != nil {
			return
		}
		again, err := canonjson.Canonical(c)
		if err != nil || string(again) != string(c) {
			t.Fatalf("canonical form is not a fixed point: %s -> %s, %v", c, again, err)
		}
	})
}

// foldedReading decodes doc the way a case-insensitive decoder sees it:
// each object as a map from case-folded name (strings.EqualFold classes,
// as encoding/json matches struct fields) to the value of the last member
// with that name. Numbers keep their text.
func foldedReading(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var read func() (any, error)
	read = func() (any, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok {
		case json.Delim('{'):
			m := map[string]any{}
			for dec.More() {
				name, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := read()
				if err != nil {
					return nil, err
				}
				m[equalFoldKey(name.(string))] = v
			}
			_, err := dec.Token()
			return m, err
		case json.Delim('['):
			var a []any
			for dec.More() {
				v, err := read()
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return tok, nil
	}
	return read()
}

// equalFoldKey maps s to a key that two strings share exactly when
// strings.EqualFold reports them equal.
func equalFoldKey(s string) string {
	return strings.Map(func(r rune) rune {
		for {
			next := unicode.SimpleFold(r)
			if next <= r {
				return next
			}
			r = next
		}
	}, s)
}

// transferFields is a handler's typed view of a body.
type transferFields struct {
	From, To, Amount, Currency any
	Kelvin                     any `json:"k"`
	LongS                      any `json:"s"`
	FromAccount                any `json:"from_account"`
	Items                      []transferFields
}

// readings returns what three decoders read from doc: encoding/json into
// any, encoding/json into a struct (case-insensitive field matching) and
// foldedReading.
func readings(t *testing.T, doc []byte) [3]any {
	t.Helper()
	var plain any
	if err := json.Unmarshal(doc, &plain); err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", doc, err)
	}
	var typed transferFields
	_ = json.Unmarshal(doc, &typed) // a type mismatch is the same either way
	folded, err := foldedReading(doc)
	if err != nil {
		t.Fatalf("foldedReading(%q): %v", doc, err)
	}
	return [3]any{plain, typed, folded}
}

// Every decoder reads a document and its canonical form the same way; so
// two documents with one canonical form (one fingerprint) are read the same.
func FuzzCanonicalJSONKeepsReading(f *testing.F) {
	for _, s := range []string{
		`{"from":"a","to":"b","amount":5,"Amount":7}`, `{"From":"a","from":"b"}`, "{\"k\":1,\"\u212a\":2}",
		`{"amount":5,"\u0041mount":7}`, `{"items":[{"to":1,"TO":2}],"a":{"b":1}}`, `{"b":1,"a":[1,{"d":"\u00e9"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := canonjson.Canonical(doc)
		if err != nil {
			return
		}
		if got, want := readings(t, c), readings(t, doc); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s and its canonical form %s are read differently:\n%#v\n%#v", doc, c, want, got)
		}
	})
}

// The same property, stated on pairs: the bug report's two transfers.
func FuzzCanonicalJSONSameFormSameReading(f *testing.F) {
	pairs := [][2]string{
		{`{"from":"a","to":"b","amount":5,"Amount":7}`, `{"from":"a","to":"b","Amount":7,"amount":5}`},
		{`{"from":"a","From":"x","to":"b"}`, `{"From":"x","from":"a","to":"b"}`},
		{`{"amount":5,"\u0041mount":7}`, `{"Amount":7,"amount":5}`},
		{"{\"k\":1,\"\u212a\":2}", "{\"\u212a\":2,\"k\":1}"},
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
	}
	for _, p := range pairs {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ca, errA := canonjson.Canonical(a)
		cb, errB := canonjson.Canonical(b)
		if errA != nil || errB != nil || !bytes.Equal(ca, cb) {
			return
		}
		if ra, rb := readings(t, a), readings(t, b); !reflect.DeepEqual(ra, rb) {
			t.Fatalf("%s and %s share the canonical form %s but are read differently:\n%#v\n%#v", a, b, ca, ra, rb)
		}
	})
}

package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/idemkit/idem/internal/canonjson/canonjsontest"
)

// checkAgainstReference fails t unless Canonical agrees with the
// canonicaliser it replaced on doc: the same canonical form, or both an
// error, except that a document with member names equal under case folding
// (which the old one accepted) must now be an error. It also checks that the
// streamed form is the returned one and that its length was known in
// advance, as the fingerprint relies on both.
func checkAgainstReference(t *testing.T, doc []byte) {
	t.Helper()
	want, wantErr := referenceCanonicalJSON(doc)
	got, err := Canonical(doc)
	if err != nil && !errors.Is(err, ErrNotCanonicalizable) {
		t.Fatalf("Canonical(%q): error %v does not match ErrNotCanonicalizable", doc, err)
	}
	switch {
	case wantErr != nil:
		if err == nil {
			t.Fatalf("Canonical(%q) = %q; the reference rejects it: %v", doc, got, wantErr)
		}
		return
	case hasFoldedDuplicate(doc):
		if err == nil {
			t.Fatalf("Canonical(%q) = %q; want an error for names equal under case folding", doc, got)
		}
		return
	case err != nil:
		t.Fatalf("Canonical(%q): %v; the reference gives %q", doc, err, want)
	case !bytes.Equal(got, want):
		t.Fatalf("Canonical(%q)\n got %q\nwant %q", doc, got, want)
	}
	d, err := Parse(doc)
	if err != nil {
		t.Fatalf("Parse(%q): %v", doc, err)
	}
	if d.Size() != len(want) {
		t.Fatalf("Parse(%q): size %d; want %d", doc, d.Size(), len(want))
	}
	var streamed bytes.Buffer
	if n, err := d.WriteTo(&smallWrites{&streamed}); n != int64(len(want)) || err != nil {
		t.Fatalf("WriteTo(%q) = %d, %v; want %d, nil", doc, n, err, len(want))
	}
	if !bytes.Equal(streamed.Bytes(), want) {
		t.Fatalf("WriteTo(%q)\n got %q\nwant %q", doc, streamed.Bytes(), want)
	}
}

// smallWrites checks that the emitter never writes an empty slice.
type smallWrites struct{ w io.Writer }

func (s *smallWrites) Write(p []byte) (int, error) {
	if len(p) == 0 {
		panic("empty write")
	}
	return s.w.Write(p)
}

func TestCanonicalJSONMatchesReferenceOnCorpus(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	n := 4000
	if testing.Short() {
		n = 500
	}
	for range n {
		doc := genDoc(r)
		checkAgainstReference(t, doc)
		checkAgainstReference(t, mutate(r, doc))
	}
	for _, body := range [][]byte{canonjsontest.Numbers(1 << 20), canonjsontest.Objects(1 << 20), canonjsontest.Strings(1 << 20), []byte(canonjsontest.Transfer)} {
		checkAgainstReference(t, body)
	}
}

func TestCanonicalJSONDepthLimitMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := map[string]string{"[": "]", `{"a":`: "}"}[open]
			doc := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			_, err := Canonical(doc)
			if ok := json.Valid(doc); ok != (err == nil) {
				t.Errorf("depth %d of %s: json.Valid = %v, Canonical error = %v", depth, open, ok, err)
			}
			checkAgainstReference(t, doc)
		}
	}
}

func FuzzCanonicalJSONMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1,{"d":"\u00e9"}]}`, `{"a":1,"A":2}`, `"\ud83d\ude00\ud800\udc00x\udc00"`,
		`{"\u0041":1,"b":[]}`, ` [ -0.5e+7 , true, null ] `, `{"a":1}}`, `{"k":1,"\u212a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { checkAgainstReference(t, doc) })
}

func TestFoldRuneIsConstantOnCaseClasses(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		f := foldRune(r)
		for _, other := range [...]rune{unicode.SimpleFold(r), unicode.ToUpper(r), unicode.ToLower(r), unicode.ToTitle(r)} {
			if g := foldRune(other); g != f {
				t.Fatalf("foldRune(%U) = %U but foldRune(%U) = %U", r, f, other, g)
			}
		}
		if r < utf8.RuneSelf {
			if got, _ := nextFolded([]byte{byte(r)}); r != '_' && r != '-' && got != f {
				t.Fatalf("ASCII fast path folds %q to %q, foldRune to %q", r, got, f)
			}
		}
	}
}

// caseClass maps each rune to its class under the relations SimpleFold, ToUpper,
// ToLower and ToTitle taken both ways: a union-find over every rune, built
// once. It is the test's own notion of "the same letter to some decoder".
var caseClass = sync.OnceValue(func() []int32 {
	parent := make([]int32, unicode.MaxRune+1)
	for i := range parent {
		parent[i] = int32(i)
	}
	find := func(x int32) int32 {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		for _, o := range [...]rune{unicode.SimpleFold(r), unicode.ToUpper(r), unicode.ToLower(r), unicode.ToTitle(r)} {
			a, b := find(r), find(o)
			if a < b {
				a, b = b, a
			}
			parent[a] = b
		}
	}
	for i := range parent {
		parent[i] = find(int32(i))
	}
	return parent
})

func classKey(name string) string {
	classes := caseClass()
	var b strings.Builder
	for _, r := range name {
		if r != '_' && r != '-' {
			b.WriteRune(rune(classes[r]))
		}
	}
	return b.String()
}

// hasFoldedDuplicate reports whether a valid JSON document has an object
// with two member names in the same classKey.
func hasFoldedDuplicate(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		object bool
		names  map[string]bool
		isName bool // the next token of an object is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.isName {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k := classKey(tok.(string))
			if top.names[k] {
				return true
			}
			top.names[k] = true
			top.isName = false
			continue
		}
		if top != nil && top.object {
			top.isName = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, names: map[string]bool{}, isName: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// genDoc returns a random JSON document, valid or nearly so, that mixes
// everything the canonical form has a rule for.
func genDoc(r *rand.Rand) []byte {
	var b []byte
	b = genSpace(r, b)
	b = genValue(r, b, 0)
	return genSpace(r, b)
}

func genSpace(r *rand.Rand, b []byte) []byte {
	for r.IntN(3) == 0 {
		b = append(b, " \t\n\r"[r.IntN(4)])
	}
	return b
}

var genNames = []string{"a", "b", "A", "amount", "Amount", "from", "FROM", "to", "k", "\u212a", "s", "\u017f",
	"i", "\u0130", "\u0131", "from_account", "fromAccount", "from-account", "é", "É", "z", "Z", "", "_", "a\"b", "\x7f"}

func genValue(r *rand.Rand, b []byte, depth int) []byte {
	k := r.IntN(10)
	if depth > 4 {
		k = 2 + r.IntN(8)
	}
	switch k {
	case 0, 1:
		b = append(b, '{')
		n := r.IntN(12)
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			b = genSpace(r, b)
			switch r.IntN(8) {
			case 0:
				b = genString(r, b)
			case 1, 2:
				b = genEscapedName(r, b, genNames[r.IntN(len(genNames))])
			default:
				b = genEscapedName(r, b, genWord(r))
			}
			b = genSpace(r, b)
			b = append(b, ':')
			b = genSpace(r, b)
			b = genValue(r, b, depth+1)
			b = genSpace(r, b)
		}
		return append(b, '}')
	case 2:
		b = append(b, '[')
		for i := range r.IntN(6) {
			if i > 0 {
				b = append(b, ',')
			}
			b = genSpace(r, b)
			b = genValue(r, b, depth+1)
			b = genSpace(r, b)
		}
		return append(b, ']')
	case 3, 4, 5:
		return genString(r, b)
	case 6, 7:
		nums := []string{"0", "-0", "1", "1.0", "1e0", "1E+2", "-12.5e-3", "123456789012345678901234567890", "0.10", "7"}
		if r.IntN(40) == 0 {
			nums = []string{"01", "1.", "-", "1e", ".5", "+1", "0x1", "1e+", "--1"}
		}
		return append(b, nums[r.IntN(len(nums))]...)
	}
	lits := []string{"true", "false", "null"}
	if r.IntN(40) == 0 {
		lits = []string{"tru", "nul", "True", "nan"}
	}
	return append(b, lits[r.IntN(len(lits))]...)
}

// genWord returns a short random member name; two of them rarely collide.
func genWord(r *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyzABCXYZ_-0é"
	runes := []rune(letters)
	var b strings.Builder
	for range 1 + r.IntN(6) {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

// genEscapedName writes name as a JSON string, escaping some of its runes.
func genEscapedName(r *rand.Rand, b []byte, name string) []byte {
	b = append(b, '"')
	for _, c := range name {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', byte(c))
		case c < 0x20 || r.IntN(5) == 0:
			b = appendU4(b, c)
		default:
			b = utf8.AppendRune(b, c)
		}
	}
	return append(b, '"')
}

func appendU4(b []byte, c rune) []byte {
	if c > 0xffff {
		hi, lo := 0xd800+(c-0x10000)>>10, 0xdc00+(c-0x10000)&0x3ff
		return appendU4(appendU4(b, hi), lo)
	}
	const hex = "0123456789abcdefABCDEF"
	return append(b, '\\', 'u', hex[c>>12&0xf], hex[c>>8&0xf], hex[c>>4&0xf], hex[c&0xf])
}

func genString(r *rand.Rand, b []byte) []byte {
	pieces := []string{"a", "Z", " ", "é", "😀", "\u2028", "\x7f", `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`,
		`\u0000`, `\u001f`, `\u0020`, `\u0022`, `\u005C`, `\u00e9`, `\u00E9`, `\uffff`, `\ud83d\ude00`, `\ud800`,
		`\udc00`, `\ud800\u0041`, `\ud800\ud800`, `\udbff\udfff`, `\uFFFD`}
	if r.IntN(40) == 0 {
		pieces = []string{"\xff", "\t", `\x`, `\u12`, "\xc3", `\'`, "\x00"}
	}
	b = append(b, '"')
	for range r.IntN(6) {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return append(b, '"')
}

// mutate damages doc a little: a byte changed, dropped, doubled or added.
func mutate(r *rand.Rand, doc []byte) []byte {
	out := bytes.Clone(doc)
	if len(out) == 0 {
		return append(out, "{}]\"\\,:"[r.IntN(7)])
	}
	i := r.IntN(len(out))
	switch r.IntN(4) {
	case 0:
		out[i] = "{}[]\",:\\ 0e-ua\xff"[r.IntN(15)]
	case 1:
		out = append(out[:i], out[i+1:]...)
	case 2:
		out = append(out[:i+1], out[i:]...)
	default:
		out = append(out, "}]\" x"[r.IntN(5)])
	}
	return out
}

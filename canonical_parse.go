package idem

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// The first pass of CanonicalJSON: it checks the document, computes the
// length of its canonical form and, for each object whose members are not
// already in canonical order, records where its members start, sorted. The
// second pass (canonical_emit.go) writes the canonical form from the
// document and those records.

const (
	// maxDepth is the deepest nesting of arrays and objects accepted, the
	// same as encoding/json's.
	maxDepth = 10000

	// maxDocLen bounds a document so that its offsets fit in a member.
	maxDocLen = math.MaxInt32

	// escapedName marks a member whose decoded name is in
	// canonicalizer.names rather than in the document.
	escapedName = 1 << 31
)

// canonicalizer holds what the first pass learns about one document.
type canonicalizer struct {
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

// member is one member of an object being parsed.
type member struct {
	at   uint32 // offset in doc of the member (the quote that opens its name)
	name uint32 // offset of the decoded name in doc, or in names if escaped
	nlen uint32 // length of the decoded name, | escapedName if escaped
}

// object is an object whose members are written in another order than the
// document's.
type object struct {
	start    uint32 // offset of '{' in doc
	first, n uint32 // its members start at sorted[first : first+n]
}

func (c *canonicalizer) nameOf(m member) []byte {
	if m.nlen&escapedName != 0 {
		return c.names[m.name : m.name+m.nlen&^escapedName]
	}
	return c.doc[m.name : m.name+m.nlen]
}

func (c *canonicalizer) parse(doc []byte) error {
	if len(doc) > maxDocLen {
		return fmt.Errorf("%w: document larger than %d bytes", ErrNotCanonicalizable, maxDocLen)
	}
	c.doc = doc
	c.open, c.sorted, c.objects = c.openBuf[:0], c.sortedBuf[:0], c.objectsBuf[:0]
	i, err := c.value(skipSpace(doc, 0))
	if err != nil {
		return err
	}
	if i = skipSpace(doc, i); i != len(doc) {
		return c.syntaxError(i)
	}
	if c.holes > 0 {
		c.objects = slices.DeleteFunc(c.objects, func(o object) bool { return o.n == 0 })
	}
	return nil
}

func (c *canonicalizer) syntaxError(i int) error {
	if i >= len(c.doc) {
		return fmt.Errorf("%w: invalid JSON: unexpected end", ErrNotCanonicalizable)
	}
	return fmt.Errorf("%w: invalid JSON: unexpected %q at offset %d", ErrNotCanonicalizable, c.doc[i], i)
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value checks the value at doc[i:] and returns the offset just after it.
func (c *canonicalizer) value(i int) (int, error) {
	doc := c.doc
	if i >= len(doc) {
		return i, c.syntaxError(i)
	}
	switch b := doc[i]; {
	case b == '{':
		return c.object(i)
	case b == '[':
		return c.array(i)
	case b == '"':
		end, n, _, err := c.str(i)
		c.size += n
		return end, err
	case b == '-' || '0' <= b && b <= '9':
		return c.number(i)
	case b == 't':
		return c.literal(i, "true")
	case b == 'f':
		return c.literal(i, "false")
	case b == 'n':
		return c.literal(i, "null")
	}
	return i, c.syntaxError(i)
}

func (c *canonicalizer) literal(i int, lit string) (int, error) {
	if !bytes.HasPrefix(c.doc[i:], []byte(lit)) {
		return i, c.syntaxError(i)
	}
	c.size += len(lit)
	return i + len(lit), nil
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func (c *canonicalizer) number(i int) (int, error) {
	doc := c.doc
	j := i
	if doc[j] == '-' {
		j++
	}
	switch {
	case j < len(doc) && doc[j] == '0':
		j++
	case j < len(doc) && isDigit(doc[j]):
		j = skipDigits(doc, j+1)
	default:
		return j, c.syntaxError(j)
	}
	if j < len(doc) && doc[j] == '.' {
		if j++; j >= len(doc) || !isDigit(doc[j]) {
			return j, c.syntaxError(j)
		}
		j = skipDigits(doc, j+1)
	}
	if j < len(doc) && (doc[j] == 'e' || doc[j] == 'E') {
		if j++; j < len(doc) && (doc[j] == '+' || doc[j] == '-') {
			j++
		}
		if j >= len(doc) || !isDigit(doc[j]) {
			return j, c.syntaxError(j)
		}
		j = skipDigits(doc, j+1)
	}
	c.size += j - i
	return j, nil
}

func skipDigits(doc []byte, i int) int {
	for i < len(doc) && isDigit(doc[i]) {
		i++
	}
	return i
}

func (c *canonicalizer) push(i int) error {
	if c.depth++; c.depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d levels at offset %d", ErrNotCanonicalizable, maxDepth, i)
	}
	return nil
}

func (c *canonicalizer) array(i int) (int, error) {
	if err := c.push(i); err != nil {
		return i, err
	}
	doc := c.doc
	c.size += 2
	if i = skipSpace(doc, i+1); i < len(doc) && doc[i] == ']' {
		c.depth--
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(i); err != nil {
			return i, err
		}
		if i = skipSpace(doc, i); i >= len(doc) {
			return i, c.syntaxError(i)
		}
		switch doc[i] {
		case ',':
			c.size++
			i = skipSpace(doc, i+1)
		case ']':
			c.depth--
			return i + 1, nil
		default:
			return i, c.syntaxError(i)
		}
	}
}

func (c *canonicalizer) object(start int) (int, error) {
	if err := c.push(start); err != nil {
		return start, err
	}
	doc := c.doc
	c.size += 2
	base, namesBase := len(c.open), len(c.names)
	i := skipSpace(doc, start+1)
	if i < len(doc) && doc[i] == '}' {
		c.depth--
		return i + 1, nil
	}
	// Take the object's place in objects now, before those of the objects
	// inside it, so that objects stays in document order.
	slot := len(c.objects)
	c.objects = appendDoubling(c.objects, object{start: uint32(start)})
	for {
		if i >= len(doc) || doc[i] != '"' {
			return i, c.syntaxError(i)
		}
		end, n, escaped, err := c.str(i)
		if err != nil {
			return end, err
		}
		c.size += n + 1 // the name and ':'
		m := member{at: uint32(i), name: uint32(i + 1), nlen: uint32(end - 1 - (i + 1))}
		if escaped {
			off := len(c.names)
			c.names = appendUnquoted(c.names, doc[i+1:end-1])
			m.name, m.nlen = uint32(off), uint32(len(c.names)-off)|escapedName
		}
		if i = skipSpace(doc, end); i >= len(doc) || doc[i] != ':' {
			return i, c.syntaxError(i)
		}
		i = skipSpace(doc, i+1)
		c.open = appendDoubling(c.open, m)
		if i, err = c.value(i); err != nil {
			return i, err
		}
		if i = skipSpace(doc, i); i >= len(doc) {
			return i, c.syntaxError(i)
		}
		switch doc[i] {
		case ',':
			c.size++
			i = skipSpace(doc, i+1)
		case '}':
			c.depth--
			err := c.closeObject(slot, c.open[base:])
			c.open, c.names = c.open[:base], c.names[:namesBase]
			return i + 1, err
		default:
			return i, c.syntaxError(i)
		}
	}
}

// closeObject checks the names of an object's members and, if they are not
// in canonical order, records them sorted in c.objects[slot]. Otherwise the
// slot is given back, or left empty if objects inside took later ones.
func (c *canonicalizer) closeObject(slot int, ms []member) error {
	if len(ms) < 2 {
		c.freeSlot(slot)
		return nil
	}
	inOrder := true
	for k := 1; k < len(ms) && inOrder; k++ {
		inOrder = bytes.Compare(c.nameOf(ms[k-1]), c.nameOf(ms[k])) < 0
	}
	switch {
	case inOrder:
	case len(ms) == 2:
		ms[0], ms[1] = ms[1], ms[0]
	default:
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(c.nameOf(a), c.nameOf(b)) })
	}
	for k := 1; k < len(ms); k++ {
		if a := c.nameOf(ms[k-1]); bytes.Equal(a, c.nameOf(ms[k])) {
			return fmt.Errorf("%w: duplicate member %q", ErrNotCanonicalizable, a)
		}
	}
	if err := c.checkFolded(ms); err != nil {
		return err
	}
	if inOrder {
		c.freeSlot(slot)
		return nil
	}
	o := &c.objects[slot]
	o.first, o.n = uint32(len(c.sorted)), uint32(len(ms))
	if len(c.sorted)+len(ms) > cap(c.sorted) {
		c.sorted = slices.Grow(c.sorted, max(len(ms), cap(c.sorted)))
	}
	for _, m := range ms {
		c.sorted = append(c.sorted, m.at)
	}
	return nil
}

func (c *canonicalizer) freeSlot(slot int) {
	if slot == len(c.objects)-1 {
		c.objects = c.objects[:slot]
	} else {
		c.holes++
	}
}

// checkFolded rejects two member names that are the same once folded (see
// foldCompare): a case-insensitive decoder would read whichever comes last.
func (c *canonicalizer) checkFolded(ms []member) error {
	clash := func(a, b member) error {
		return fmt.Errorf("%w: member names %q and %q match the same field of a case-insensitive decoder",
			ErrNotCanonicalizable, c.nameOf(a), c.nameOf(b))
	}
	if len(ms) <= 8 {
		for a := range ms {
			for b := a + 1; b < len(ms); b++ {
				if foldCompare(c.nameOf(ms[a]), c.nameOf(ms[b])) == 0 {
					return clash(ms[a], ms[b])
				}
			}
		}
		return nil
	}
	order := c.scratch[:0]
	for k := range ms {
		order = append(order, int32(k))
	}
	c.scratch = order
	slices.SortFunc(order, func(a, b int32) int { return foldCompare(c.nameOf(ms[a]), c.nameOf(ms[b])) })
	for k := 1; k < len(order); k++ {
		if a, b := ms[order[k-1]], ms[order[k]]; foldCompare(c.nameOf(a), c.nameOf(b)) == 0 {
			return clash(a, b)
		}
	}
	return nil
}

// appendDoubling is append, but it at least doubles the capacity when it
// grows it: a large document then allocates about twice what it keeps,
// where append's smaller steps for large slices would allocate five times.
func appendDoubling[S ~[]E, E any](s S, v ...E) S {
	if len(s)+len(v) > cap(s) {
		s = slices.Grow(s, max(len(v), cap(s)))
	}
	return append(s, v...)
}

// plain marks the bytes that stand for themselves in a JSON string and in
// its canonical form: printable ASCII but " and \.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 0x80; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// str checks the string at doc[i:] and returns the offset just after it,
// the length of its canonical form and whether it has escapes.
func (c *canonicalizer) str(i int) (end, n int, escaped bool, err error) {
	doc := c.doc
	j := i + 1
	n = 2
	for {
		k := j
		for k < len(doc) && plain[doc[k]] {
			k++
		}
		n += k - j
		if j = k; j >= len(doc) {
			return j, n, escaped, c.syntaxError(j)
		}
		switch b := doc[j]; {
		case b == '"':
			return j + 1, n, escaped, nil
		case b == '\\':
			r, size := unescape(doc[j:])
			if size == 0 {
				return j, n, escaped, fmt.Errorf("%w: invalid JSON: invalid escape at offset %d", ErrNotCanonicalizable, j)
			}
			escaped = true
			n += canonRuneLen(r)
			j += size
		case b < 0x20:
			return j, n, escaped, fmt.Errorf("%w: invalid JSON: control character in a string at offset %d", ErrNotCanonicalizable, j)
		default:
			r, size := utf8.DecodeRune(doc[j:])
			if r == utf8.RuneError && size == 1 {
				return j, n, escaped, fmt.Errorf("%w: invalid UTF-8 at offset %d", ErrNotCanonicalizable, j)
			}
			n += size
			j += size
		}
	}
}

// unescape decodes the escape sequence at the start of s (s[0] == '\\') as
// encoding/json does: an unpaired surrogate stands for U+FFFD. It returns
// the rune and the length of the sequence, or a zero length if the
// sequence is not valid JSON.
func unescape(s []byte) (r rune, n int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r := hex4(s[2:])
		if r < 0 {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(s) >= 8 && s[6] == '\\' && s[7] == 'u' {
			if pair := utf16.DecodeRune(r, hex4(s[8:])); pair != utf8.RuneError {
				return pair, 12
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

// hex4 returns the value of the four hex digits that start s, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, b := range s[:4] {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b -= 'a' - 10
		case 'A' <= b && b <= 'F':
			b -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(b)
	}
	return r
}

// appendUnquoted appends the decoded contents of a checked JSON string
// (without its quotes).
func appendUnquoted(dst, s []byte) []byte {
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:k]...)
		r, n := unescape(s[k:])
		dst = utf8.AppendRune(dst, r)
		s = s[k+n:]
	}
	return dst
}

package canonjson

import (
	"bytes"
	"fmt"
	"math"
	"slices"
)

// The first pass (Parse): it checks the document, computes the length of
// its canonical form and, for each object whose members are not already in
// canonical order, records where its members start, sorted. The second pass
// (emit.go) writes the canonical form from the document and those records.

const (
	// maxDepth is the deepest nesting of arrays and objects accepted, the
	// same as encoding/json's.
	maxDepth = 10000

	// maxDocLen bounds a document so that its offsets fit in a member.
	maxDocLen = math.MaxInt32

	// escapedName marks a member whose decoded name is in
	// Doc.names rather than in the document.
	escapedName = 1 << 31
)

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

func (d *Doc) nameOf(m member) []byte {
	if m.nlen&escapedName != 0 {
		return d.names[m.name : m.name+m.nlen&^escapedName]
	}
	return d.doc[m.name : m.name+m.nlen]
}

func (d *Doc) parse(doc []byte) error {
	if len(doc) > maxDocLen {
		return fmt.Errorf("%w: document larger than %d bytes", ErrNotCanonicalizable, maxDocLen)
	}
	d.doc = doc
	d.open, d.sorted, d.objects = d.openBuf[:0], d.sortedBuf[:0], d.objectsBuf[:0]
	i, err := d.value(skipSpace(doc, 0))
	if err != nil {
		return err
	}
	if i = skipSpace(doc, i); i != len(doc) {
		return d.syntaxError(i)
	}
	if d.holes > 0 {
		d.objects = slices.DeleteFunc(d.objects, func(o object) bool { return o.n == 0 })
	}
	return nil
}

func (d *Doc) syntaxError(i int) error {
	if i >= len(d.doc) {
		return fmt.Errorf("%w: invalid JSON: unexpected end", ErrNotCanonicalizable)
	}
	return fmt.Errorf("%w: invalid JSON: unexpected %q at offset %d", ErrNotCanonicalizable, d.doc[i], i)
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
func (d *Doc) value(i int) (int, error) {
	doc := d.doc
	if i >= len(doc) {
		return i, d.syntaxError(i)
	}
	switch b := doc[i]; {
	case b == '{':
		return d.object(i)
	case b == '[':
		return d.array(i)
	case b == '"':
		end, n, _, err := d.str(i)
		d.size += n
		return end, err
	case b == '-' || '0' <= b && b <= '9':
		return d.number(i)
	case b == 't':
		return d.literal(i, "true")
	case b == 'f':
		return d.literal(i, "false")
	case b == 'n':
		return d.literal(i, "null")
	}
	return i, d.syntaxError(i)
}

func (d *Doc) literal(i int, lit string) (int, error) {
	if !bytes.HasPrefix(d.doc[i:], []byte(lit)) {
		return i, d.syntaxError(i)
	}
	d.size += len(lit)
	return i + len(lit), nil
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func (d *Doc) number(i int) (int, error) {
	doc := d.doc
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
		return j, d.syntaxError(j)
	}
	if j < len(doc) && doc[j] == '.' {
		if j++; j >= len(doc) || !isDigit(doc[j]) {
			return j, d.syntaxError(j)
		}
		j = skipDigits(doc, j+1)
	}
	if j < len(doc) && (doc[j] == 'e' || doc[j] == 'E') {
		if j++; j < len(doc) && (doc[j] == '+' || doc[j] == '-') {
			j++
		}
		if j >= len(doc) || !isDigit(doc[j]) {
			return j, d.syntaxError(j)
		}
		j = skipDigits(doc, j+1)
	}
	d.size += j - i
	return j, nil
}

func skipDigits(doc []byte, i int) int {
	for i < len(doc) && isDigit(doc[i]) {
		i++
	}
	return i
}

func (d *Doc) push(i int) error {
	if d.depth++; d.depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d levels at offset %d", ErrNotCanonicalizable, maxDepth, i)
	}
	return nil
}

func (d *Doc) array(i int) (int, error) {
	if err := d.push(i); err != nil {
		return i, err
	}
	doc := d.doc
	d.size += 2
	if i = skipSpace(doc, i+1); i < len(doc) && doc[i] == ']' {
		d.depth--
		return i + 1, nil
	}
	for {
		var err error
		if i, err = d.value(i); err != nil {
			return i, err
		}
		if i = skipSpace(doc, i); i >= len(doc) {
			return i, d.syntaxError(i)
		}
		switch doc[i] {
		case ',':
			d.size++
			i = skipSpace(doc, i+1)
		case ']':
			d.depth--
			return i + 1, nil
		default:
			return i, d.syntaxError(i)
		}
	}
}

func (d *Doc) object(start int) (int, error) {
	if err := d.push(start); err != nil {
		return start, err
	}
	doc := d.doc
	d.size += 2
	base, namesBase := len(d.open), len(d.names)
	i := skipSpace(doc, start+1)
	if i < len(doc) && doc[i] == '}' {
		d.depth--
		return i + 1, nil
	}
	// Take the object's place in objects now, before those of the objects
	// inside it, so that objects stays in document order.
	slot := len(d.objects)
	d.objects = appendDoubling(d.objects, object{start: uint32(start)})
	for {
		if i >= len(doc) || doc[i] != '"' {
			return i, d.syntaxError(i)
		}
		end, n, escaped, err := d.str(i)
		if err != nil {
			return end, err
		}
		d.size += n + 1 // the name and ':'
		m := member{at: uint32(i), name: uint32(i + 1), nlen: uint32(end - 1 - (i + 1))}
		if escaped {
			off := len(d.names)
			d.names = appendUnquoted(d.names, doc[i+1:end-1])
			m.name, m.nlen = uint32(off), uint32(len(d.names)-off)|escapedName
		}
		if i = skipSpace(doc, end); i >= len(doc) || doc[i] != ':' {
			return i, d.syntaxError(i)
		}
		i = skipSpace(doc, i+1)
		d.open = appendDoubling(d.open, m)
		if i, err = d.value(i); err != nil {
			return i, err
		}
		if i = skipSpace(doc, i); i >= len(doc) {
			return i, d.syntaxError(i)
		}
		switch doc[i] {
		case ',':
			d.size++
			i = skipSpace(doc, i+1)
		case '}':
			d.depth--
			err := d.closeObject(slot, d.open[base:])
			d.open, d.names = d.open[:base], d.names[:namesBase]
			return i + 1, err
		default:
			return i, d.syntaxError(i)
		}
	}
}

// closeObject checks the names of an object's members and, if they are not
// in canonical order, records them sorted in d.objects[slot]. Otherwise the
// slot is given back, or left empty if objects inside took later ones.
func (d *Doc) closeObject(slot int, ms []member) error {
	if len(ms) < 2 {
		d.freeSlot(slot)
		return nil
	}
	inOrder := true
	for k := 1; k < len(ms) && inOrder; k++ {
		inOrder = bytes.Compare(d.nameOf(ms[k-1]), d.nameOf(ms[k])) < 0
	}
	switch {
	case inOrder:
	case len(ms) == 2:
		ms[0], ms[1] = ms[1], ms[0]
	default:
		slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(d.nameOf(a), d.nameOf(b)) })
	}
	for k := 1; k < len(ms); k++ {
		if a := d.nameOf(ms[k-1]); bytes.Equal(a, d.nameOf(ms[k])) {
			return fmt.Errorf("%w: duplicate member %q", ErrNotCanonicalizable, a)
		}
	}
	if err := d.checkFolded(ms); err != nil {
		return err
	}
	if inOrder {
		d.freeSlot(slot)
		return nil
	}
	o := &d.objects[slot]
	o.first, o.n = uint32(len(d.sorted)), uint32(len(ms))
	if len(d.sorted)+len(ms) > cap(d.sorted) {
		d.sorted = slices.Grow(d.sorted, max(len(ms), cap(d.sorted)))
	}
	for _, m := range ms {
		d.sorted = append(d.sorted, m.at)
	}
	return nil
}

func (d *Doc) freeSlot(slot int) {
	if slot == len(d.objects)-1 {
		d.objects = d.objects[:slot]
	} else {
		d.holes++
	}
}

// checkFolded rejects two member names that are the same once folded (see
// foldCompare): a case-insensitive decoder would read whichever comes last.
func (d *Doc) checkFolded(ms []member) error {
	clash := func(a, b member) error {
		return fmt.Errorf("%w: member names %q and %q match the same field of a case-insensitive decoder",
			ErrNotCanonicalizable, d.nameOf(a), d.nameOf(b))
	}
	if len(ms) <= 8 {
		for a := range ms {
			for b := a + 1; b < len(ms); b++ {
				if foldCompare(d.nameOf(ms[a]), d.nameOf(ms[b])) == 0 {
					return clash(ms[a], ms[b])
				}
			}
		}
		return nil
	}
	order := d.scratch[:0]
	for k := range ms {
		order = append(order, int32(k))
	}
	d.scratch = order
	slices.SortFunc(order, func(a, b int32) int { return foldCompare(d.nameOf(ms[a]), d.nameOf(ms[b])) })
	for k := 1; k < len(order); k++ {
		if a, b := ms[order[k-1]], ms[order[k]]; foldCompare(d.nameOf(a), d.nameOf(b)) == 0 {
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

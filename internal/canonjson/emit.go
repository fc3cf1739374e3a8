package canonjson

import (
	"io"
	"slices"
)

// The second pass (Doc.WriteTo, Canonical): it walks the checked document
// again and writes its canonical form, taking the members of the objects
// the first pass recorded in their sorted order.

// flushSize is the size of the buffer through which the canonical form is
// written to an io.Writer.
const flushSize = 8 << 10

// emitter writes the canonical form of the document Parse has checked.
type emitter struct {
	d   *Doc
	out []byte
	w   io.Writer // if nil, out collects the whole canonical form
	n   int64     // bytes written to w
	err error     // w's first error; nothing is written after it
}

func (e *emitter) flush() {
	if e.w != nil && len(e.out) > 0 {
		e.send(e.out)
		e.out = e.out[:0]
	}
}

// send writes p to w unless w has failed.
func (e *emitter) send(p []byte) {
	if e.err == nil {
		n, err := e.w.Write(p)
		e.n += int64(n)
		e.err = err
	}
}

func (e *emitter) maybeFlush() {
	if e.w != nil && len(e.out) >= flushSize {
		e.flush()
	}
}

func (e *emitter) write(p []byte) {
	if e.w != nil && len(e.out)+len(p) > flushSize {
		e.flush()
		if len(p) > flushSize {
			e.send(p)
			return
		}
	}
	e.out = append(e.out, p...)
}

// value writes the value at doc[i:] (after optional whitespace) and returns
// the offset just after it.
func (e *emitter) value(i int) int {
	doc := e.d.doc
	i = skipSpace(doc, i)
	switch doc[i] {
	case '{':
		return e.object(i)
	case '[':
		return e.array(i)
	case '"':
		return e.str(i)
	case 't':
		e.out = append(e.out, "true"...)
		return i + 4
	case 'f':
		e.out = append(e.out, "false"...)
		return i + 5
	case 'n':
		e.out = append(e.out, "null"...)
		return i + 4
	}
	j := i + 1
	for j < len(doc) && numberByte[doc[j]] {
		j++
	}
	e.write(doc[i:j])
	return j
}

var numberByte = func() (t [256]bool) {
	for _, b := range []byte("0123456789+-.eE") {
		t[b] = true
	}
	return t
}()

func (e *emitter) array(i int) int {
	doc := e.d.doc
	e.out = append(e.out, '[')
	if i = skipSpace(doc, i+1); doc[i] == ']' {
		e.out = append(e.out, ']')
		return i + 1
	}
	for {
		i = skipSpace(doc, e.value(i))
		if doc[i] == ']' {
			e.out = append(e.out, ']')
			return i + 1
		}
		e.out = append(e.out, ',')
		e.maybeFlush()
		i++
	}
}

func (e *emitter) object(i int) int {
	d := e.d
	if k, found := slices.BinarySearchFunc(d.objects, uint32(i), func(o object, start uint32) int {
		return int(o.start) - int(start)
	}); found {
		o := d.objects[k]
		e.out = append(e.out, '{')
		last, end := 0, 0 // the member last in the document, and where it ends
		for n, at := range d.sorted[o.first : o.first+o.n] {
			if n > 0 {
				e.out = append(e.out, ',')
			}
			if j := e.member(int(at)); int(at) > last {
				last, end = int(at), j
			}
			e.maybeFlush()
		}
		e.out = append(e.out, '}')
		return skipSpace(d.doc, end) + 1 // after '}'
	}
	// The members are in canonical order already.
	doc := d.doc
	e.out = append(e.out, '{')
	if i = skipSpace(doc, i+1); doc[i] == '}' {
		e.out = append(e.out, '}')
		return i + 1
	}
	for {
		i = skipSpace(doc, e.member(i))
		if doc[i] == '}' {
			e.out = append(e.out, '}')
			return i + 1
		}
		e.out = append(e.out, ',')
		e.maybeFlush()
		i = skipSpace(doc, i+1)
	}
}

// member writes the member at doc[i:] (its name, ':' and value) and returns
// the offset just after it.
func (e *emitter) member(i int) int {
	i = skipSpace(e.d.doc, e.str(i)) // then ':'
	e.out = append(e.out, ':')
	return e.value(i + 1)
}

// str writes the canonical form of the string at doc[i:] and returns the
// offset just after it.
func (e *emitter) str(i int) int {
	doc := e.d.doc
	e.out = append(e.out, '"')
	j := i + 1
	for {
		k := j
		for doc[k] != '"' && doc[k] != '\\' {
			k++
		}
		e.write(doc[j:k])
		if doc[k] == '"' {
			e.out = append(e.out, '"')
			return k + 1
		}
		r, n := unescape(doc[k:])
		e.out = appendCanonRune(e.out, r)
		e.maybeFlush()
		j = k + n
	}
}

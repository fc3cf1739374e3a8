// Package canonjsontest holds the JSON bodies that the benchmarks of
// canonical JSON (internal/canonjson) and of fingerprints (idem) measure,
// the bodies of docs/BENCHMARKS.md's section "Fingerprint (canonical JSON)".
package canonjsontest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// Transfer is a 200-byte transfer request body.
const Transfer = `{"from":"acc_7f3a9c2e51","to":"acc_19be44d0c3","amount":125000,"currency":"EUR",` +
	`"reference":"Invoice 2026-0042, consulting","metadata":{"order_id":"ord_5521","channel":"mobile"}}`

type transferBody struct {
	From      string            `json:"from"`
	To        string            `json:"to"`
	Amount    int64             `json:"amount"`
	Currency  string            `json:"currency"`
	Reference string            `json:"reference"`
	Metadata  map[string]string `json:"metadata"`
}

// Numbers returns a JSON array of small integers, about size bytes.
func Numbers(size int) []byte {
	r := rand.New(rand.NewPCG(1, 1))
	b := []byte{'['}
	for len(b) < size {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(r.IntN(1000)), 10)
	}
	return append(b, ']')
}

type item struct {
	ID      int64    `json:"id"`
	Name    string   `json:"name"`
	Active  bool     `json:"active"`
	Score   float64  `json:"score"`
	Tags    []string `json:"tags"`
	Address struct {
		Street string `json:"street"`
		City   string `json:"city"`
		Zip    string `json:"zip"`
	} `json:"address"`
}

// Objects returns a JSON array of small objects whose members are not in
// canonical order, about size bytes.
func Objects(size int) []byte {
	b := []byte{'['}
	for i := 0; len(b) < size; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id":%d,"name":"user-%d","active":%t,"score":%d.5,"tags":["t%d","x"],`+
			`"address":{"street":"%d Main St","city":"Lisbon","zip":"1%04d"}}`, i, i, i%2 == 0, i%100, i%7, i, i%10000)
	}
	return append(b, ']')
}

// Strings returns a JSON array of strings with escapes, about size bytes.
func Strings(size int) []byte {
	b := []byte{'['}
	for i := 0; len(b) < size; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"line %d\n\tcaf\u00e9 \"quoted\" \ud83d\ude00 %s"`, i, strings.Repeat("x", i%40))
	}
	return append(b, ']')
}

// Pairs returns a JSON array of two-member objects out of order, about size
// bytes: the most members to reorder per byte.
func Pairs(size int) []byte {
	b := []byte{'['}
	for len(b) < size {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `{"b":1,"a":2}`...)
	}
	return append(b, ']')
}

// Body is one benchmark body.
type Body struct {
	Name  string
	Doc   []byte
	Typed func() any // a new value of the handler's own decode target
}

// Bodies returns the benchmark bodies, built on the first call; callers
// must not modify them.
func Bodies() []Body { return bodies() }

var bodies = sync.OnceValue(func() []Body {
	return []Body{
		{"numbers-1MiB", Numbers(1 << 20), func() any { return new([]int) }},
		{"objects-1MiB", Objects(1 << 20), func() any { return new([]item) }},
		{"pairs-1MiB", Pairs(1 << 20), func() any { return new([]struct{ A, B int }) }},
		{"transfer-200B", []byte(Transfer), func() any { return new(transferBody) }},
	}
})

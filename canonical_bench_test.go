package idem

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// Bodies for the benchmarks in docs/BENCHMARKS.md, section "Fingerprint
// (canonical JSON)".

const benchTransfer = `{"from":"acc_7f3a9c2e51","to":"acc_19be44d0c3","amount":125000,"currency":"EUR",` +
	`"reference":"Invoice 2026-0042, consulting","metadata":{"order_id":"ord_5521","channel":"mobile"}}`

type benchTransferBody struct {
	From      string            `json:"from"`
	To        string            `json:"to"`
	Amount    int64             `json:"amount"`
	Currency  string            `json:"currency"`
	Reference string            `json:"reference"`
	Metadata  map[string]string `json:"metadata"`
}

// benchNumbers is a JSON array of small integers, about size bytes.
func benchNumbers(size int) []byte {
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

type benchItem struct {
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

// benchObjects is a JSON array of small objects whose members are not in
// canonical order, about size bytes.
func benchObjects(size int) []byte {
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

// benchStrings is a JSON array of strings with escapes, about size bytes.
func benchStrings(size int) []byte {
	b := []byte{'['}
	for i := 0; len(b) < size; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"line %d\n\tcaf\u00e9 \"quoted\" \ud83d\ude00 %s"`, i, strings.Repeat("x", i%40))
	}
	return append(b, ']')
}

// benchPairs is a JSON array of two-member objects out of order, about
// size bytes: the most members to reorder per byte.
func benchPairs(size int) []byte {
	b := []byte{'['}
	for len(b) < size {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `{"b":1,"a":2}`...)
	}
	return append(b, ']')
}

var benchBodies = []struct {
	name  string
	body  []byte
	typed func() any // the handler's own decode target
}{
	{"numbers-1MiB", benchNumbers(1 << 20), func() any { return new([]int) }},
	{"objects-1MiB", benchObjects(1 << 20), func() any { return new([]benchItem) }},
	{"pairs-1MiB", benchPairs(1 << 20), func() any { return new([]struct{ A, B int }) }},
	{"transfer-200B", []byte(benchTransfer), func() any { return new(benchTransferBody) }},
}

func BenchmarkCanonicalJSON(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CanonicalJSON(bb.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCanonicalJSONBefore measures the canonicaliser this one replaced.
func BenchmarkCanonicalJSONBefore(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := referenceCanonicalJSON(bb.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFingerprint(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			in := FingerprintInput{Method: "POST", Route: "/transfers", Body: bb.body, JSON: true}
			for b.Loop() {
				NewFingerprint(in)
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name+"/any", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(bb.body, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bb.name+"/typed", func(b *testing.B) {
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := json.Unmarshal(bb.body, bb.typed()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

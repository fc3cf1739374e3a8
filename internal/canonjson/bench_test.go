package canonjson

import (
	"encoding/json"
	"testing"

	"github.com/idemkit/idem/internal/canonjson/canonjsontest"
)

// The benchmarks of docs/BENCHMARKS.md, section "Fingerprint (canonical
// JSON)", but BenchmarkFingerprint (package idem); the bodies are
// canonjsontest's.

func BenchmarkCanonicalJSON(b *testing.B) {
	for _, bb := range canonjsontest.Bodies() {
		b.Run(bb.Name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.Doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Canonical(bb.Doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCanonicalJSONBefore measures the canonicaliser this one replaced.
func BenchmarkCanonicalJSONBefore(b *testing.B) {
	for _, bb := range canonjsontest.Bodies() {
		b.Run(bb.Name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.Doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := referenceCanonicalJSON(bb.Doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	for _, bb := range canonjsontest.Bodies() {
		b.Run(bb.Name+"/any", func(b *testing.B) {
			b.SetBytes(int64(len(bb.Doc)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(bb.Doc, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bb.Name+"/typed", func(b *testing.B) {
			b.SetBytes(int64(len(bb.Doc)))
			b.ReportAllocs()
			for b.Loop() {
				if err := json.Unmarshal(bb.Doc, bb.Typed()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

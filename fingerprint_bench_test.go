package idem_test

import (
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/canonjson/canonjsontest"
)

// BenchmarkFingerprint is in docs/BENCHMARKS.md, section "Fingerprint
// (canonical JSON)", with the benchmarks of internal/canonjson on the same
// bodies.
func BenchmarkFingerprint(b *testing.B) {
	for _, bb := range canonjsontest.Bodies() {
		b.Run(bb.Name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.Doc)))
			b.ReportAllocs()
			in := idem.FingerprintInput{Method: "POST", Route: "/transfers", Body: bb.Doc, JSON: true}
			for b.Loop() {
				idem.NewFingerprint(in)
			}
		})
	}
}

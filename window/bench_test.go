package window_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem/window"
)

// benchIDs returns n distinct ids shaped like broker message ids.
func benchIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%012d", prefix, i)
	}
	return ids
}

// reportChecks adds checks per second to the benchmark's figures.
func reportChecks(b *testing.B, checks int) {
	b.ReportMetric(float64(checks)/b.Elapsed().Seconds(), "checks/s")
}

// BenchmarkMemoryCheck measures checks of a Memory on the real clock.
//
//   - Fresh: a check is Reserve then Confirm of an id not seen within the
//     window (what a new message costs). Ids cycle through 2²⁰ names and
//     the window is 50ms, so each comes back long after it was forgotten,
//     and the Memory holds, and expires, hundreds of thousands of ids all
//     along: its steady state.
//   - Duplicate: a check is Reserve of an id confirmed within the window
//     (what a redelivery costs), among 2²⁰ confirmed ids.
//   - FreshParallel: Fresh from GOMAXPROCS goroutines, to show how the
//     shards scale with -cpu.
func BenchmarkMemoryCheck(b *testing.B) {
	ctx := context.Background()
	const n = 1 << 20
	b.Run("Fresh", func(b *testing.B) {
		m, err := window.NewMemory(&window.MemoryConfig{Window: 50 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		ids := benchIDs("fresh", n)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			id := ids[i&(n-1)]
			i++
			r, err := m.Reserve(ctx, id)
			if err != nil || r.Status != window.Reserved {
				b.Fatalf("Reserve(%q) = %v, %v", id, r.Status, err)
			}
			if err := m.Confirm(ctx, id, r.Token); err != nil {
				b.Fatal(err)
			}
		}
		reportChecks(b, i)
	})
	b.Run("Duplicate", func(b *testing.B) {
		m, err := window.NewMemory(&window.MemoryConfig{Window: time.Hour, MaxIDs: 2 * n})
		if err != nil {
			b.Fatal(err)
		}
		ids := benchIDs("dup", n)
		for _, id := range ids {
			r, err := m.Reserve(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Confirm(ctx, id, r.Token); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			id := ids[i&(n-1)]
			i++
			if r, err := m.Reserve(ctx, id); err != nil || r.Status != window.Done {
				b.Fatalf("Reserve(%q) = %v, %v", id, r.Status, err)
			}
		}
		reportChecks(b, i)
	})
	b.Run("FreshParallel", func(b *testing.B) {
		m, err := window.NewMemory(&window.MemoryConfig{Window: 50 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		var worker atomic.Int32
		var checks atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ids := benchIDs(fmt.Sprint("p", worker.Add(1)), n/4)
			i := 0
			for pb.Next() {
				id := ids[i%len(ids)]
				i++
				r, err := m.Reserve(ctx, id)
				if err != nil || r.Status != window.Reserved {
					b.Errorf("Reserve(%q) = %v, %v", id, r.Status, err)
					return
				}
				if err := m.Confirm(ctx, id, r.Token); err != nil {
					b.Error(err)
					return
				}
			}
			checks.Add(int64(i))
		})
		reportChecks(b, int(checks.Load()))
	})
}

// BenchmarkMemoryFootprint fills a Memory with 2²⁰ confirmed ids of 20
// bytes and reports the heap it holds per id, for sizing.
func BenchmarkMemoryFootprint(b *testing.B) {
	ctx := context.Background()
	const n = 1 << 20
	ids := benchIDs("footprint", n) // 20 bytes each
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := window.NewMemory(&window.MemoryConfig{MaxIDs: 2 * n, Window: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range ids {
			r, err := m.Reserve(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Confirm(ctx, id, r.Token); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/id")
		runtime.KeepAlive(m)
	}
}

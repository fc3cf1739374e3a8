package rediswindow_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/window"
	"github.com/idemkit/idem/window/rediswindow"
	"github.com/redis/go-redis/v9"
)

const benchBatch = 100

func benchWindow(b *testing.B) *rediswindow.Window {
	b.Helper()
	c := redistest.Client(b)
	// Short lease and window: the keys the benchmark writes expire by
	// themselves, on a server others share.
	w, err := rediswindow.New(c, &rediswindow.Config{Name: redistest.Name(b, c), Lease: 10 * time.Second, Window: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func reportChecks(b *testing.B, checks int) {
	b.ReportMetric(float64(checks)/b.Elapsed().Seconds(), "checks/s")
}

// BenchmarkRedisCheck measures checks of a Redis window over loopback.
//
//   - PipelinedFresh: a check is the reservation and the confirmation of
//     a new id; each op is a batch of 100, ReserveBatch then ConfirmBatch:
//     two round trips per 100 checks.
//   - PipelinedDuplicate: a check is the reservation of an id confirmed
//     within the window (a redelivery); each op is one ReserveBatch of
//     100: one round trip.
//   - Single: a check is Reserve then Confirm of a new id, one round trip
//     each, for comparison.
func BenchmarkRedisCheck(b *testing.B) {
	ctx := context.Background()
	b.Run("PipelinedFresh", func(b *testing.B) {
		w := benchWindow(b)
		ids := make([]string, benchBatch)
		n := 0
		for b.Loop() {
			for i := range ids {
				ids[i] = fmt.Sprint("m", n)
				n++
			}
			rs, err := w.ReserveBatch(ctx, ids)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rs {
				if r.Status != window.Reserved {
					b.Fatalf("%s is %v", r.ID, r.Status)
				}
			}
			if err := w.ConfirmBatch(ctx, rs); err != nil {
				b.Fatal(err)
			}
		}
		reportChecks(b, n)
	})
	b.Run("PipelinedDuplicate", func(b *testing.B) {
		w := benchWindow(b)
		ids := make([]string, benchBatch)
		for i := range ids {
			ids[i] = fmt.Sprint("m", i)
		}
		rs, err := w.ReserveBatch(ctx, ids)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.ConfirmBatch(ctx, rs); err != nil {
			b.Fatal(err)
		}
		n := 0
		for b.Loop() {
			rs, err := w.ReserveBatch(ctx, ids)
			if err != nil {
				b.Fatal(err)
			}
			if rs[0].Status != window.Done {
				b.Fatalf("%s is %v", rs[0].ID, rs[0].Status)
			}
			n += len(ids)
		}
		reportChecks(b, n)
	})
	b.Run("Single", func(b *testing.B) {
		w := benchWindow(b)
		n := 0
		for b.Loop() {
			id := fmt.Sprint("m", n)
			n++
			r, err := w.Reserve(ctx, id)
			if err != nil || r.Status != window.Reserved {
				b.Fatalf("Reserve(%q) = %v, %v", id, r.Status, err)
			}
			if err := w.Confirm(ctx, id, r.Token); err != nil {
				b.Fatal(err)
			}
		}
		reportChecks(b, n)
	})
}

// BenchmarkRedisFootprint confirms 100,000 ids of 7 to 9 bytes (keys of
// about 45 bytes) and reports the server's used_memory growth per id, for
// sizing. The server is shared: other clients' writes meanwhile count too.
func BenchmarkRedisFootprint(b *testing.B) {
	ctx := context.Background()
	const n = 100_000
	for b.Loop() {
		w := benchWindow(b)
		c := redistest.Client(b)
		before := usedMemory(b, c)
		ids := make([]string, 0, 1000)
		for i := 0; i < n; i += cap(ids) {
			ids = ids[:0]
			for k := range cap(ids) {
				ids = append(ids, fmt.Sprint("m", i+k))
			}
			rs, err := w.ReserveBatch(ctx, ids)
			if err != nil {
				b.Fatal(err)
			}
			if err := w.ConfirmBatch(ctx, rs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(usedMemory(b, c)-before)/n, "B/id")
		b.ReportMetric(float64(len(w.Key("m50000"))), "key-bytes")
	}
}

func usedMemory(b *testing.B, c *redis.Client) int64 {
	b.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}

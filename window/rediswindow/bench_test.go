package rediswindow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/window"
	"github.com/idemkit/idem/window/rediswindow"
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

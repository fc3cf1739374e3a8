package idem_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// BenchmarkDoWait runs first executions without contention over memstore,
// with Wait off and on: a Wait that never has to wait costs nothing, and
// Wait off is the path of every call without it.
func BenchmarkDoWait(b *testing.B) {
	for _, bc := range []struct {
		name string
		wait time.Duration
	}{{"Off", 0}, {"On", time.Second}} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := idem.New(memstore.New(), &idem.Config{ReplayCacheBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			work := func(context.Context) (idem.Result, error) { return idem.Result{Status: 201}, nil }
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				req := idem.Request{Scope: "s", Key: "k" + strconv.Itoa(i), Fingerprint: "fp"}
				req.Wait = bc.wait
				if _, _, err := g.Do(ctx, req, work); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

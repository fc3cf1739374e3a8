package memstore

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/leasetest"
)

// TestLeasedConformance runs the leasetest suite. Nothing survives the
// process, so the store is not Persistent; a local step's effect is a
// value set through its *Tx.
func TestLeasedConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		NewLocation: func(testing.TB) string { return "" },
		Open: func(context.Context, string) (idem.LeasedStore, error) {
			return New(), nil
		},
		Effect: writeEffect,
		CountEffects: func(_ context.Context, s idem.LeasedStore, name string) (int, error) {
			return countEffects(s.(*Store), name), nil
		},
	})
}

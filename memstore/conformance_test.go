package memstore

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storetest"
)

// TestConformance runs the storetest suite. A work cannot end a memstore
// transaction, nor make it fail to commit, so EndTx and FailCommit are nil.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewLocation: func(testing.TB) string { return "" },
		Open: func(context.Context, string) (idem.Store, error) {
			return New(), nil
		},
		Effect: writeEffect,
		CountEffects: func(_ context.Context, s idem.Store, name string) (int, error) {
			return countEffects(s.(*Store), name), nil
		},
		// Another writer's record lands in the map while the Tx holds the
		// key's lock.
		PlantRecord: func(_ context.Context, s idem.Store, rec *idem.Record) (bool, error) {
			ms := s.(*Store)
			ms.mu.Lock()
			defer ms.mu.Unlock()
			ms.records[recordKey{rec.Scope, rec.Key}] = *clone(*rec)
			return false, nil
		},
	})
}

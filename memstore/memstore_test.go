package memstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewLocation: func(t *testing.T) string { return t.Name() },
		Open: func(ctx context.Context, location string) (idem.Store, error) {
			return memstore.New(), nil
		},
		Effect: func(ctx context.Context, name string) error {
			tx, ok := memstore.TxFrom(ctx)
			if !ok {
				return errors.New("no memstore transaction in context")
			}
			n, _ := tx.Get(name)
			tx.Set(name, n+"x")
			return nil
		},
		CountEffects: func(ctx context.Context, s idem.Store, name string) (int, error) {
			v, _ := s.(*memstore.Store).Value(name)
			return len(v), nil
		},
	})
}

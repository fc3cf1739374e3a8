package memstore

import (
	"context"
	"errors"
)

// The conformance suites' test effect on a memstore: the effect name is a
// value of the store, one "x" longer for each effect written.

// writeEffect writes the effect name through the transaction ctx carries.
func writeEffect(ctx context.Context, name string) error {
	tx, ok := TxFrom(ctx)
	if !ok {
		return errors.New("no memstore transaction in the context")
	}
	n, _ := tx.Get(name)
	tx.Set(name, n+"x")
	return nil
}

// countEffects returns how many effects name s holds.
func countEffects(s *Store, name string) int {
	v, _ := s.Value(name)
	return len(v)
}

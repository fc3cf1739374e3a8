package idem

import (
	"context"
	"fmt"
)

// Forget deletes a record as Admin.Forget does, through the Guard's store,
// which must implement Admin (itself, or a store it wraps and returns from
// an Unwrap() Store method, as idemotel's does). The Guard's replay cache
// then serves nothing
// it held before, so that this Guard's next call with the key runs the
// work again; other Guards on the store stop replaying the record from
// their caches within their Config.ReplayCacheAge.
func (g *Guard) Forget(ctx context.Context, p *ForgetParams) (*Record, error) {
	a, ok := adminOf(g.store)
	if !ok {
		return nil, fmt.Errorf("idem: Forget: the store (%T) does not implement Admin", g.store)
	}
	rec, err := a.Forget(ctx, p)
	// Even a failed Forget may have committed: start a new epoch (after
	// the delete, so that a replay read before it is not kept either).
	g.epoch.Add(1)
	return rec, err
}

// adminOf returns the Admin of s, or of the store s wraps.
func adminOf(s Store) (Admin, bool) {
	for range 8 { // wrappers of wrappers, but never a cycle
		if a, ok := s.(Admin); ok {
			return a, true
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			return nil, false
		}
		s = u.Unwrap()
	}
	return nil, false
}

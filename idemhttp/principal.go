package idemhttp

import "context"

type principalKey struct{}

// WithPrincipal returns a copy of ctx that carries the principal that
// authentication established for the request: a user, client or tenant id
// that stays the same across token refreshes. Authentication middleware
// calls it before the idempotency layer runs; DefaultScope reads it.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// PrincipalFrom returns the principal that WithPrincipal stored in ctx, and
// whether there is a non-empty one.
func PrincipalFrom(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(principalKey{}).(string)
	return p, ok && p != ""
}

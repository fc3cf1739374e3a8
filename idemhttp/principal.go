package idemhttp

import "context"

type principalKey struct{}

// WithPrincipal returns a copy of ctx that carries the principal that
// authentication established for the request: a user, client or tenant id
// that stays the same across token refreshes. Authentication middleware
// calls it before the idempotency layer runs; DefaultScope reads it. The
// principal becomes the scope of the request's key, so it must tell every
// caller apart: prefix ids of different kinds ("user:42", "tenant:7"), and
// never use AnonymousScope as one. An empty principal counts as none.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// PrincipalFrom returns the principal that WithPrincipal stored in ctx, and
// whether there is a non-empty one.
func PrincipalFrom(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(principalKey{}).(string)
	return p, ok && p != ""
}

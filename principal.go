package idem

import (
	"context"
	"errors"
)

type principalKey struct{}

// ErrNoPrincipal is the error a scope function returns when a request or
// call has no principal to scope its key by. The transports (idemhttp,
// idemgrpc) then refuse it, unless the route or method lets anonymous
// callers share AnonymousScope.
var ErrNoPrincipal = errors.New("idem: the request has no principal to scope its key by")

// AnonymousScope is the scope that requests without a principal share
// where anonymous callers are allowed. No principal should be named
// "anonymous": it would share its records with those callers.
const AnonymousScope = "anonymous"

// WithPrincipal returns a copy of ctx that carries the principal that
// authentication established: a user, client or tenant id that stays the
// same across token refreshes (docs/DESIGN.md K2). Authentication
// middleware or interceptors call it before the idempotency layer runs,
// whose default scope is the principal. It must tell every caller apart:
// prefix ids of different kinds ("user:42", "tenant:7"), and never use
// AnonymousScope as one. An empty principal counts as none.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// PrincipalFrom returns the principal that WithPrincipal stored in ctx, and
// whether there is a non-empty one.
func PrincipalFrom(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(principalKey{}).(string)
	return p, ok && p != ""
}

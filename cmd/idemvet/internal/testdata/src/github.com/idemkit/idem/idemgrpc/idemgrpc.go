// Package idemgrpc is a stub of idem's idemgrpc for idemvet's tests.
package idemgrpc

import "context"

const MetadataKey = "idempotency-key"

func WithKey(ctx context.Context, key string) context.Context { return ctx }

package idemgrpc

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

type keyContextKey struct{}

// WithKey returns a copy of ctx that carries the key of one intent, made
// when the intent was (the user pressed Confirm): every call made with the
// returned context, and every retry the application makes with it, sends
// this key. See docs/DESIGN.md#c1.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyContextKey{}, key)
}

// KeyFrom returns the key WithKey stored in ctx, and whether there is one.
func KeyFrom(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyContextKey{}).(string)
	return k, ok
}

// ClientConfig configures UnaryClientInterceptor. The zero value, and a nil
// *ClientConfig, mean defaults.
type ClientConfig struct {
	// Methods are the full method names the interceptor gives keys to;
	// other calls pass through untouched. Defaults to every unary method.
	Methods []string

	// NewKey makes the key of a call whose context carries none (see
	// WithKey). Defaults to idem.RandomKey.
	NewKey func() string
}

// UnaryClientInterceptor returns a client interceptor that sends one key
// per call intent in the idempotency-key metadata entry:
//
//   - the key WithKey stored in the call's context, if any;
//   - otherwise a new key, made once for the call.
//
// A call that already carries an idempotency-key entry in its outgoing
// metadata is left as it is. A client interceptor runs once per call,
// above the ClientConn's own retries: gRPC's retry policy (a service
// config's retryPolicy) and its transparent retries resend the metadata the
// interceptor attached, so every attempt of one call carries the same key.
// A retry the application makes by calling again is a new call: it must
// pass the intent's key with WithKey, or it gets a new key and may run the
// work twice.
//
// A key from WithKey that idem.ValidateKey rejects fails the call with
// InvalidArgument before anything is sent.
func UnaryClientInterceptor(cfg *ClientConfig) grpc.UnaryClientInterceptor {
	var c ClientConfig
	if cfg != nil {
		c = *cfg
	}
	if c.NewKey == nil {
		c.NewKey = idem.RandomKey
	}
	var only map[string]bool
	if c.Methods != nil {
		only = make(map[string]bool, len(c.Methods))
		for _, m := range c.Methods {
			only[m] = true
		}
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if only != nil && !only[method] {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(MetadataKey)) > 0 {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		key, ok := KeyFrom(ctx)
		if !ok {
			key = c.NewKey()
		}
		if err := idem.ValidateKey(key); err != nil {
			return status.Error(codes.InvalidArgument, fmt.Sprintf("idemgrpc: %v", err))
		}
		ctx = metadata.AppendToOutgoingContext(ctx, MetadataKey, idem.FormatKey(key))
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

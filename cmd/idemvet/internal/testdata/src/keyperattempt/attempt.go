package keyperattempt

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

type keyTransport struct{ next http.RoundTripper }

func (t keyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req.Header.Set("Idempotency-Key", uuid.NewString()) // want `in RoundTrip, which runs once per attempt`
	return t.next.RoundTrip(req)
}

func keyInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", idem.RandomKey()) // want `in a gRPC client interceptor`
	return invoker(ctx, method, req, reply, cc, opts...)
}

func newInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(idemgrpc.WithKey(ctx, uuid.NewString()), method, req, reply, cc, opts...) // want `in a gRPC client interceptor`
	}
}

func logHook(c *retryablehttp.Client) {
	c.RequestLogHook = func(_ retryablehttp.Logger, r *http.Request, n int) {
		r.Header.Set("Idempotency-Key", uuid.NewString()) // want `in the retry hook RequestLogHook`
	}
}

func prepareRetry() *retryablehttp.Client {
	return &retryablehttp.Client{PrepareRetry: func(r *http.Request) error {
		r.Header.Set("Idempotency-Key", idem.RandomKey()) // want `in the retry hook PrepareRetry`
		return nil
	}}
}

// Near misses.

type requireKey struct{ next http.RoundTripper }

func (t requireKey) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Idempotency-Key") == "" { // nearmiss: only checks the key
		return nil, errors.New("no idempotency key")
	}
	return t.next.RoundTrip(req)
}

type ctxKey struct{}

type keyFromContext struct{ next http.RoundTripper }

func (t keyFromContext) RoundTrip(req *http.Request) (*http.Response, error) {
	if k, ok := req.Context().Value(ctxKey{}).(string); ok {
		req.Header.Set("Idempotency-Key", k) // nearmiss: the caller's key, made once
	}
	return t.next.RoundTrip(req)
}

func passInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if k, ok := ctx.Value(ctxKey{}).(string); ok {
		ctx = metadata.AppendToOutgoingContext(ctx, idemgrpc.MetadataKey, k) // nearmiss: the caller's key
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func traceHook(c *retryablehttp.Client) {
	c.RequestLogHook = func(_ retryablehttp.Logger, r *http.Request, n int) {
		r.Header.Set("X-Trace-Id", uuid.NewString()) // nearmiss: a trace id may change per attempt
	}
}

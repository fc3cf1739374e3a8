// Package idem is a stub of the real package's API for idemvet's tests.
package idem

import "context"

type Result struct {
	Status int
	Body   []byte
}

type Request struct{ Scope, Key, Fingerprint string }

type Work func(ctx context.Context) (Result, error)

type Guard struct{}

func (g *Guard) Do(ctx context.Context, req Request, work Work) (Result, bool, error) {
	res, err := work(ctx)
	return res, false, err
}

type Tx interface{ Handle() any }

func TxFrom(ctx context.Context) (Tx, bool) { return nil, false }

type Run struct{}

func RunFrom(ctx context.Context) (*Run, bool) { return nil, false }

func (r *Run) DerivedKey(step string) string { return step }

func (r *Run) Step(ctx context.Context, name string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	return fn(ctx)
}

func (r *Run) LocalStep(ctx context.Context, name string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	return fn(ctx)
}

type LeasedWork func(ctx context.Context, run *Run) (Result, error)

type LeasedRequest struct{ Scope, Key, Fingerprint, Kind string }

type Leased struct{}

func (l *Leased) Do(ctx context.Context, req LeasedRequest, work LeasedWork) (Result, bool, error) {
	res, err := work(ctx, &Run{})
	return res, false, err
}

func (l *Leased) Register(kind string, work LeasedWork) error { return nil }

func DerivedKey(scope, key, step string) string { return key + step }

func RandomKey() string { return "" }
func UUIDv7Key() string { return "" }

type BeginParams struct{ Scope, Key string }

type ClaimParams struct{ Scope, Key, Fingerprint string }

func ParseKey(field string) (string, error) { return field, nil }

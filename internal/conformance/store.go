package conformance

import (
	"context"
	"testing"
)

// The harnesses of the store suites open a store of type S at a location
// and may close it and count the test effects it holds; these helpers call
// those functions for a case and fail it on an error.

// Open opens a store at location with open, fails t on an error or a nil
// store, and registers closeFn, when set, as a clean-up of t.
func Open[S any](t testing.TB, open func(ctx context.Context, location string) (S, error), closeFn func(S) error, location string) S {
	t.Helper()
	s, err := open(context.Background(), location)
	if err != nil {
		t.Fatalf("Open(%q): %v", location, err)
	}
	if any(s) == nil {
		t.Fatalf("Open(%q) returned a nil store", location)
	}
	if closeFn != nil {
		t.Cleanup(func() { _ = closeFn(s) })
	}
	return s
}

// Close closes s with closeFn, when set, and fails t on an error.
func Close[S any](t testing.TB, closeFn func(S) error, s S) {
	t.Helper()
	if closeFn == nil {
		return
	}
	if err := closeFn(s); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// Effects returns how many committed test effects called name s holds,
// by count, and fails t on an error.
func Effects[S any](t testing.TB, count func(ctx context.Context, s S, name string) (int, error), s S, name string) int {
	t.Helper()
	n, err := count(context.Background(), s, name)
	if err != nil {
		t.Fatalf("CountEffects(%q): %v", name, err)
	}
	return n
}

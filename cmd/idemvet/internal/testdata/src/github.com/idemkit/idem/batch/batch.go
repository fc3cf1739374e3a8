// Package batch is a stub for idemvet's tests.
package batch

import (
	"context"

	"github.com/idemkit/idem"
)

type Item[T any] struct {
	ID   string
	Body T
}

type Apply[T any] func(ctx context.Context, item Item[T]) (idem.Result, error)

type Config struct{}

type Report struct{}

func Run[T any](ctx context.Context, g *idem.Guard, cfg *Config, items []Item[T], apply Apply[T]) (*Report, error) {
	return nil, nil
}

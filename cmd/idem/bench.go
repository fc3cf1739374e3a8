package main

import (
	"context"
)

type benchCommand struct {
	*Main
}

func (c *benchCommand) Run(ctx context.Context, args []string) error {
	return usageError{"bench: not built yet"}
}

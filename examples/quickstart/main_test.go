package main

import (
	"context"
	"testing"
)

// TestQuickstart runs the README's quickstart; run fails unless the transfer
// was applied exactly once and the duplicate and the mismatch were refused.
func TestQuickstart(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idem/internal/natstest"
)

// TestNATSConsumer runs the example against the local NATS server; run
// fails unless each transfer took effect exactly once, a retry within the
// stream's window was dropped by the stream and one after it by the inbox.
func TestNATSConsumer(t *testing.T) {
	t.Parallel()
	url := natstest.Require(t)
	var out strings.Builder
	if err := run(context.Background(), url, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
}

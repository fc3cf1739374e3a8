package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/idemkit/idem/internal/amqptest"
)

// TestRabbitConsumer runs the example against the test broker: each
// transfer applied once, its republished copy a duplicate, the overdraft
// refused.
func TestRabbitConsumer(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), amqptest.Require(t), &out); err != nil {
		t.Fatal(err)
	}
	want := "alice: 50\nbob: 20\ncarol: 30\napplied 3, duplicates 2, refused 1\n"
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

package natsoutbox_test

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem/internal/crashchild"
)

// mustDial connects a crash child to url.
func mustDial(url string) (*nats.Conn, jetstream.JetStream) {
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		crashchild.Fail("outbox", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		crashchild.Fail("outbox", err)
	}
	return nc, js
}

package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/internal/natstest"
)

// TestServeOnMySQLPublishes runs idem serve -db mysql://… -publish
// nats://…: each applied transfer's event, staged in the key's
// transaction, reaches the stream once, a replay stages none.
func TestServeOnMySQLPublishes(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	_, dsn := mysqltest.Database(t)
	events := natstest.Name(t)
	stream := eventsNamed(events).Stream
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, stream)
	})
	s := startServe(t, "-db", mysqltest.URL(t, dsn), "-publish", natstest.URL(), "-events", events)
	s.accounts(t)
	for _, key := range []string{"pub-1", "pub-2", "pub-1"} {
		if status, body := s.do(t, "POST", "/transfers", key, `{"from":"a","to":"b","amount":3}`); status != 201 {
			t.Fatalf("POST /transfers %s = %d %s, want 201", key, status, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var st jetstream.Stream
	for st == nil {
		var err error
		if st, err = js.Stream(ctx, stream); err != nil && ctx.Err() != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		if st == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for len(ids) < 2 {
		m, err := c.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("after %d events: %v", len(ids), err)
		}
		var e struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(m.Data(), &e); err != nil || e.EventID == "" {
			t.Fatalf("event %q: %v", m.Data(), err)
		}
		if ids[e.EventID] {
			t.Fatalf("event %s published twice", e.EventID)
		}
		ids[e.EventID] = true
	}
	if code, _ := s.stop(t); code != 0 {
		t.Errorf("idem serve exited %d\n%s", code, s.stderr)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Errorf("the stream holds %d events, want 2 (two transfers, one replay)", info.State.Msgs)
	}
}

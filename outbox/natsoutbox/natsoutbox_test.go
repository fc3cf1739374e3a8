package natsoutbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/natsoutbox"
	"github.com/idemkit/idem/sqlitestore"
)

// TestPublishSendsTheIDAsNatsMsgIDAndDeduplicates publishes one envelope
// twice and a batch: the stream keeps one copy of each id, with its
// headers, in order.
func TestPublishSendsTheIDAsNatsMsgIDAndDeduplicates(t *testing.T) {
	_, js := natstest.Connect(t)
	st := natstest.Stream(t, js, jetstream.StreamConfig{})
	name := st.CachedInfo().Config.Name
	pub, err := natsoutbox.New(js, &natsoutbox.Config{Stream: name, Subject: natstest.Subject(st, "default")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	e := outbox.Envelope{ID: "msg_one", Subject: natstest.Subject(st, "created"), Body: []byte("b"), Headers: map[string]string{"X-A": "1"}}
	for range 2 {
		if err := pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	var batch []outbox.Envelope
	for i := range 5 {
		batch = append(batch, outbox.Envelope{ID: fmt.Sprint("msg_b", i), Body: []byte(fmt.Sprint(i))})
	}
	for i, err := range pub.PublishBatch(ctx, append(batch, batch[0])) {
		if err != nil {
			t.Fatalf("batch message %d: %v", i, err)
		}
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 6 {
		t.Fatalf("the stream holds %d messages, want 6 (duplicates dropped)", info.State.Msgs)
	}
	m, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Nats-Msg-Id") != "msg_one" || m.Header.Get("X-A") != "1" || m.Subject != e.Subject {
		t.Errorf("stored %s %v, want Nats-Msg-Id msg_one and the header", m.Subject, m.Header)
	}
	for i := range 5 {
		m, err := st.GetMsg(ctx, uint64(i+2))
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != fmt.Sprint(i) || m.Subject != natstest.Subject(st, "default") {
			t.Errorf("message %d is %s %q, want the batch in order on the default subject", i+2, m.Subject, m.Data)
		}
	}
}

// TestPublishExpectsTheStream checks that a publish the wrong stream would
// store fails, as a failure to retry rather than a refusal.
func TestPublishExpectsTheStream(t *testing.T) {
	_, js := natstest.Connect(t)
	st := natstest.Stream(t, js, jetstream.StreamConfig{})
	pub, err := natsoutbox.New(js, &natsoutbox.Config{Stream: "NOT_" + st.CachedInfo().Config.Name})
	if err != nil {
		t.Fatal(err)
	}
	e := outbox.Envelope{ID: "msg_x", Subject: natstest.Subject(st, "x")}
	err = pub.Publish(t.Context(), e)
	if err == nil || errors.Is(err, outbox.ErrRefused) {
		t.Fatalf("publish to another stream = %v, want a failure that is not a refusal", err)
	}
	if errs := pub.PublishBatch(t.Context(), []outbox.Envelope{e}); errs[0] == nil {
		t.Fatal("a batch publish to another stream succeeded")
	}
}

// TestTooLargeIsRefused checks that a message larger than the stream's
// limit is a refusal, which the relay counts toward parking.
func TestTooLargeIsRefused(t *testing.T) {
	_, js := natstest.Connect(t)
	st := natstest.Stream(t, js, jetstream.StreamConfig{MaxMsgSize: 16})
	pub, _ := natsoutbox.New(js, nil)
	e := outbox.Envelope{ID: "msg_big", Subject: natstest.Subject(st, "x"), Body: []byte(strings.Repeat("x", 100))}
	if err := pub.Publish(t.Context(), e); !errors.Is(err, outbox.ErrRefused) {
		t.Fatalf("a message over MaxMsgSize = %v, want a refusal", err)
	}
	if errs := pub.PublishBatch(t.Context(), []outbox.Envelope{e}); !errors.Is(errs[0], outbox.ErrRefused) {
		t.Fatalf("a batched message over MaxMsgSize = %v, want a refusal", errs[0])
	}
}

// TestRelayToJetStream stages messages in Guard.Do on SQLite and relays
// them to a stream: each committed message is stored once, in order.
func TestRelayToJetStream(t *testing.T) {
	_, js := natstest.Connect(t)
	st := natstest.Stream(t, js, jetstream.StreamConfig{})
	store, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		_, _, err := g.Do(t.Context(), idem.Request{Scope: "s", Key: fmt.Sprint("k", i)}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 200}, outbox.Stage(ctx, outbox.Message{Name: "created", Subject: natstest.Subject(st, "created"), Body: []byte(fmt.Sprint(i))})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	pub, _ := natsoutbox.New(js, &natsoutbox.Config{Stream: st.CachedInfo().Config.Name})
	r := outbox.NewRelay(store.Outbox(), pub, &outbox.RelayConfig{BatchSize: 16})
	for range 10 {
		if k, err := r.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		} else if k == 0 {
			break
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("the stream holds %d messages, want %d", info.State.Msgs, n)
	}
	for i := range n {
		m, err := st.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != fmt.Sprint(i) || m.Header.Get("Nats-Msg-Id") != outbox.ID("s", fmt.Sprint("k", i), "created") {
			t.Fatalf("message %d is %q %v, want #%d with its outbox id", i+1, m.Data, m.Header, i)
		}
	}
}

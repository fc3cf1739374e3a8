package natsinbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/inbox"
	"github.com/idemkit/idem/inbox/natsinbox"
	"github.com/idemkit/idem/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{6, 32 * time.Second}, {7, time.Minute}, {8, time.Minute}, {1 << 30, time.Minute},
	} {
		if got := natsinbox.DefaultBackoff(tc.attempt); got != tc.want {
			t.Errorf("DefaultBackoff(%d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
}

// An invalid Config is refused before anything is consumed, with an error
// naming the field.
func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	noID := func(jetstream.Msg) (string, error) { return "", nil }
	for _, tc := range []struct {
		cfg  natsinbox.Config
		want string
	}{
		{natsinbox.Config{InProgressEvery: -time.Second}, "Config.InProgressEvery"},
		{natsinbox.Config{Prefetch: -1}, "Config.Prefetch"},
		{natsinbox.Config{PullExpiry: -time.Second}, "Config.PullExpiry"},
		{natsinbox.Config{PullHeartbeat: 3 * time.Second}, "Config.PullHeartbeat"},
		{natsinbox.Config{MessageID: noID, FallbackToSequence: true}, "Config.FallbackToSequence"},
	} {
		err := natsinbox.Consume(context.Background(), nil, nil, nil, &tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Consume(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
		o, err := natsinbox.Handle(context.Background(), nil, nil, nil, &tc.cfg)
		if o != inbox.Retry || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Handle(%+v) = %s, %v; want retry and an error naming %s", tc.cfg, o, err, tc.want)
		}
	}
}

// Publish refuses a key that is not 1 to 255 visible ASCII characters,
// and publishes nothing then.
func TestPublishRefusesBadKey(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	s := natstest.Stream(t, js, jetstream.StreamConfig{})
	for _, k := range []string{"", "two words", strings.Repeat("k", 256), "é"} {
		_, err := natsinbox.Publish(context.Background(), js, natstest.Subject(s, "x"), []byte("{}"), k)
		if !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("Publish(key %q) = %v, want idem.ErrInvalidKey", k, err)
		}
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("the stream holds %d messages, want 0", info.State.Msgs)
	}
}

// Publish sets the key as Nats-Msg-Id, over a WithMsgID among its options,
// and leaves the caller's options as they were.
func TestPublishSetsMsgID(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	s := natstest.Stream(t, js, jetstream.StreamConfig{})
	opts := make([]jetstream.PublishOpt, 1, 2)
	opts[0] = jetstream.WithMsgID("other")
	if _, err := natsinbox.Publish(context.Background(), js, natstest.Subject(s, "x"), []byte("{}"), "intent-1", opts...); err != nil {
		t.Fatal(err)
	}
	if opts[:2][1] != nil {
		t.Fatal("Publish wrote into the spare capacity of the caller's options")
	}
	msg, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get(jetstream.MsgIDHeader); got != "intent-1" {
		t.Errorf("Nats-Msg-Id = %q, want intent-1", got)
	}
}

package natstest_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

func TestName(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^T_[0-9A-F]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		n := natstest.Name(t)
		if !valid.MatchString(n) || seen[n] {
			t.Fatalf("Name = %q: not a fresh T_ and 12 hex digits", n)
		}
		seen[n] = true
	}
}

// Stream creates a stream with a fresh name and subject, and deletes it at
// clean-up.
func TestStream(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t)
	var name string
	t.Run("Create", func(t *testing.T) {
		s := natstest.Stream(t, js, jetstream.StreamConfig{})
		name = s.CachedInfo().Config.Name
		if _, err := js.Publish(context.Background(), natstest.Subject(s, "x"), []byte("m")); err != nil {
			t.Fatalf("the stream does not capture its subject: %v", err)
		}
	})
	if _, err := js.Stream(context.Background(), name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream %s after clean-up: %v, want not found", name, err)
	}
}

// A cluster started by StartCluster serves a stream with three replicas,
// survives the loss of a node, and takes the node back.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	_, js := natstest.Dial(t, c.URL())
	var err error
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3})
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("create a stream with 3 replicas: %v", err)
	}
	c.Kill(0)
	publish := func() {
		t.Helper()
		for end := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := js.Publish(ctx, "r3", []byte("m"))
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("publish: %v", err)
			}
		}
	}
	publish()
	c.Start(0)
	c.WaitReady(60 * time.Second)
	publish()
}

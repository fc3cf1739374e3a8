package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/amqptest"
	"github.com/idemkit/idem/internal/natstest"
)

// NATS down when idem serve -publish starts is no reason not to start:
// transfers commit and stage their events, and the relay publishes them
// once NATS is up (the stream created then).
func TestServePublishStartsWhileNATSIsDown(t *testing.T) {
	t.Parallel()
	ns := natstest.StartServer(t)
	ns.Kill()
	db := t.TempDir() + "/idem.db"
	srv := startIdem(t, "serve", "-db", db, "-publish", ns.URL())
	if !strings.Contains(srv.stderr.String(), "NATS cannot be reached") {
		t.Errorf("no warning that NATS is down:\n%s", srv.stderr)
	}
	srv.accounts(t)
	for _, key := range []string{"k1", "k2"} {
		if status, body := srv.do(t, "POST", "/transfers", key, `{"from":"a","to":"b","amount":1}`); status != 201 {
			t.Fatalf("POST /transfers while NATS is down: %d %s", status, body)
		}
	}
	ns.Start()
	_, js := natstest.Dial(t, ns.URL())
	var msgs uint64
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := js.Stream(ctx, "TRANSFER_EVENTS")
		cancel()
		if err == nil {
			if msgs = s.CachedInfo().State.Msgs; msgs >= 2 {
				break
			}
		}
	}
	if msgs != 2 {
		t.Fatalf("TRANSFER_EVENTS holds %d events after NATS came up, want 2\n%s", msgs, srv.stderr)
	}
	if code, _ := srv.stop(t); code != 0 {
		t.Errorf("exit %d\n%s", code, srv.stderr)
	}
}

// Credentials RabbitMQ refuses are a configuration error, reported when
// idem relay starts rather than on every publish.
func TestRelayRefusesWrongAMQPCredentialsAtStart(t *testing.T) {
	t.Parallel()
	amqptest.Require(t)
	db := t.TempDir() + "/idem.db"
	// A database of idem serve's to relay from.
	s := startIdem(t, "serve", "-db", db)
	if code, _ := s.stop(t); code != 0 {
		t.Fatalf("idem serve exit %d\n%s", code, s.stderr)
	}
	cmd := exec.Command(binary, "relay", "-db", db, "-publish", "amqp://guest:wrong-password@127.0.0.1:5672/")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("idem relay with a wrong password still running after 30 s:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "RabbitMQ refused the connection") || strings.Contains(string(out), "wrong-password") {
		t.Errorf("idem relay with a wrong password: %v\n%s", err, out)
	}
}

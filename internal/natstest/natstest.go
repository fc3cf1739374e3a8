// Package natstest is the NATS plumbing the module's tests share: which
// server they use, what happens when it is missing, streams with unique
// names, and a JetStream cluster of nats-server processes that a test can
// kill and restart.
//
// The shared server is the one at IDEM_NATS_URL, or [DefaultURL], with
// JetStream enabled. When it cannot be reached, tests that need it are
// skipped, except under CI=true, where a missing server fails them: CI
// must never pass by skipping. Tests never stop or restart that server;
// a test that kills brokers starts its own (see [StartCluster]).
package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idem/internal/servertest"
)

// DefaultURL is the server the tests use when IDEM_NATS_URL is not set.
const DefaultURL = "nats://127.0.0.1:4222"

var server = &servertest.Server{
	Name: "NATS with JetStream", Env: "IDEM_NATS_URL", Default: DefaultURL, Hint: "start nats-server -js",
	Ping: func(ctx context.Context, url string) error {
		deadline, _ := ctx.Deadline() // nats.go connects without a context
		nc, err := nats.Connect(url, nats.Timeout(time.Until(deadline)))
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx)
		return err
	},
}

// URL returns IDEM_NATS_URL, or DefaultURL when it is not set.
func URL() string { return server.Addr() }

// Require returns URL() when a JetStream server answers there. When none
// does, Require skips the test, or fails it under CI=true. The server is
// tried once per test binary; every later call gives the same verdict.
func Require(t testing.TB) string {
	t.Helper()
	return server.Require(t)
}

// missing skips t, or fails it under CI=true, for a server or a program
// the test needs and does not have.
func missing(t testing.TB, what string, err error) {
	t.Helper()
	servertest.Missing(t, what, err)
}

// Connect calls Require and returns a connection to the shared server and
// its JetStream context; the connection is closed at clean-up.
func Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return Dial(t, Require(t))
}

// Dial connects to url (one server or a comma-separated list), reconnecting
// for ever when a server goes away, and returns the connection and its
// JetStream context; the connection is closed at clean-up.
func Dial(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Name returns a fresh name, unique across tests and runs, that is valid
// as a stream name, a consumer name and a subject token: "T_" and 12
// upper-case hex digits.
func Name(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "T_" + strings.ToUpper(hex.EncodeToString(b[:]))
}

// Stream creates a stream from cfg on js, with a fresh name and the subject
// "<name>.>" when cfg leaves them empty, and deletes it at clean-up. Use
// Subject to make subjects the stream captures.
func Stream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = Name(t)
	}
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{cfg.Name + ".>"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, cfg.Name); err != nil {
			t.Logf("delete stream %s: %v", cfg.Name, err)
		}
	})
	return s
}

// Subject returns a subject that a stream made by Stream with a default
// subject captures: "<stream>.<token>".
func Subject(s jetstream.Stream, token string) string {
	return s.CachedInfo().Config.Name + "." + token
}

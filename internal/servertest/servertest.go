// Package servertest is what the module's tests share about the servers
// they need (PostgreSQL, Redis, NATS, RabbitMQ): where each one is, and
// what happens when it is missing. Outside CI a test that needs a missing
// server is skipped with a message that says how to provide it; under
// CI=true it fails, since CI must never pass by skipping.
package servertest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"
)

// pingWait bounds how long a server takes to answer Require's ping.
const pingWait = 5 * time.Second

// Server is one server the tests need.
type Server struct {
	// Name names the server in messages, such as "PostgreSQL".
	Name string
	// Env is the environment variable that overrides Default.
	Env string
	// Default is the address tests use when Env is not set.
	Default string
	// Hint says how to provide the server, for the skip message.
	Hint string
	// Ping checks that the server at addr answers before ctx ends (5
	// seconds after Require called it).
	Ping func(ctx context.Context, addr string) error
	// Redact hides secrets of an address in messages. Optional.
	Redact func(addr string) string

	once sync.Once
	err  error
}

// Addr returns the value of Env, or Default when it is not set.
func (s *Server) Addr() string {
	if a := os.Getenv(s.Env); a != "" {
		return a
	}
	return s.Default
}

// Require returns Addr() when the server answers. When it does not, it
// skips the test, or fails it under CI=true. The server is tried once per
// test binary; every later call gives the same verdict.
func (s *Server) Require(t testing.TB) string {
	t.Helper()
	addr := s.Addr()
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), pingWait)
		defer cancel()
		s.err = s.Ping(ctx, addr)
	})
	if s.err == nil {
		return addr
	}
	shown := addr
	if s.Redact != nil {
		shown = s.Redact(addr)
	}
	Missing(t, s.Name+" at "+shown+" is unreachable (set "+s.Env+", or "+s.Hint+")", s.err)
	return ""
}

// Missing skips t, or fails it under CI=true, for a server or a program
// the test needs and does not have.
func Missing(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s under CI=true: %v", what, err)
	}
	t.Skipf("%s: %v", what, err)
}

// ClusterEnv is the variable that lets the cluster tests run.
const ClusterEnv = "IDEM_CLUSTER_TESTS"

// Cluster skips t unless IDEM_CLUSTER_TESTS=1. Tests that start clusters
// of servers (Galera, a PostgreSQL primary and standby, Redis Sentinel)
// run in a step of .ci/run of their own, one package at a time, after the
// others: beside the rest of the suite their load starved the timing of
// unrelated tests.
func Cluster(t testing.TB) {
	t.Helper()
	if os.Getenv(ClusterEnv) != "1" {
		t.Skip("a cluster test: it runs with " + ClusterEnv + "=1 (.ci/run has a step for it)")
	}
}

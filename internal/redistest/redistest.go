// Package redistest is the Redis plumbing the module's tests share.
//
// Most tests use one shared server: the one at IDEM_REDIS_ADDR
// (host:port), or [DefaultAddr]. When it cannot be reached, tests that
// need it are skipped, except under CI=true, where a missing server fails
// them: CI must never pass by skipping. Tests share the server with each
// other and with other processes, so each keeps to the keys its [Name]
// covers, which are deleted when the test ends, and none stops, restarts
// or flushes it.
//
// A test that kills, restarts or fails over servers starts its own, on
// Unix: [StartServer] starts a redis-server process on a free loopback
// port in a temporary directory, [StartCluster] a Redis Cluster of them
// (with or without replicas). A test may kill such a server with SIGKILL
// and restart it from its files. Every process is killed (with its
// process group) when the test ends, also when it fails. When
// redis-server or redis-cli is missing, the test is skipped, or fails
// under CI=true.
package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/servertest"
)

// DefaultAddr is the server the tests use when IDEM_REDIS_ADDR is not set.
const DefaultAddr = "127.0.0.1:6379"

var server = &servertest.Server{
	Name: "Redis", Env: "IDEM_REDIS_ADDR", Default: DefaultAddr, Hint: "start the server",
	Ping: func(ctx context.Context, addr string) error {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer c.Close()
		return c.Ping(ctx).Err()
	},
}

// Addr returns IDEM_REDIS_ADDR, or DefaultAddr when it is not set.
func Addr() string { return server.Addr() }

// Require returns Addr() when the server answers. When it does not,
// Require skips the test, or fails it under CI=true. The server is tried
// once per test binary; every later call gives the same verdict.
func Require(t testing.TB) string {
	t.Helper()
	return server.Require(t)
}

// Client returns a client of the server (see Require), closed when the
// test ends.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: Require(t)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

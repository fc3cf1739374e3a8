// Package redistest is the Redis plumbing the module's tests share: which
// server they use, what happens when it is missing, and names of keys that
// no other test uses and that are deleted when the test ends.
//
// The server is the one at IDEM_REDIS_ADDR (host:port), or [DefaultAddr].
// When it cannot be reached, tests that need it are skipped, except under
// CI=true, where a missing server fails them: CI must never pass by
// skipping. Tests share the server with each other and with other
// processes, so each keeps to the keys its Name covers.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/servertest"
)

// DefaultAddr is the server the tests use when IDEM_REDIS_ADDR is not set.
const DefaultAddr = "127.0.0.1:6379"

var server = &servertest.Server{
	Name: "Redis", Env: "IDEM_REDIS_ADDR", Default: DefaultAddr, Hint: "start the server",
	Ping: func(addr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
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

// Name returns a name no other test uses ("idemtest_" and random hex), for
// the test to put in every key it writes. When the test ends, every key
// of the server whose name contains it is deleted, through c.
func Name(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "idemtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := Delete(ctx, c, "*"+name+"*"); err != nil {
			t.Logf("delete the keys of %s: %v", name, err)
		}
	})
	return name
}

// Delete deletes every key that matches the glob pattern.
func Delete(ctx context.Context, c redis.UniversalClient, pattern string) error {
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := c.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

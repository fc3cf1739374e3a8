package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/servertest"

	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/redisstore"
)

// Open with a failover URL (master_name=) goes through the sentinels to
// the master, and follows them to the promoted replica once the master is
// killed.
func TestOpenSentinel(t *testing.T) {
	servertest.Cluster(t)
	t.Parallel()
	ss := redistest.StartSentinels(t, redistest.ServerOptions{Password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := redisstore.Open(ctx, ss.URL(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.Client()
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := ss.Master.Client().Get(ctx, "k").Val(); got != "before" {
		t.Fatalf("the master has %q, want the write made through the sentinels", got)
	}
	if n, err := c.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d replicas, %v", n, err)
	}
	ss.Master.Kill()
	if err := ss.WaitFailover(ctx); err != nil {
		t.Fatal(err)
	}
	// The client's first commands after the kill may meet the dead
	// master; it follows the sentinels' switch within a few tries.
	var last error
	for range 100 {
		if last = c.Set(ctx, "k2", "after", 0).Err(); last == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("no write after the failover: %v", last)
	}
	if got := c.Get(ctx, "k").Val(); got != "before" {
		t.Fatalf("after the failover: %q, want the replicated write", got)
	}
	if got := ss.Replica.Client().Get(ctx, "k2").Val(); got != "after" {
		t.Fatalf("the promoted replica has %q, want the write made after the failover", got)
	}
}

func TestOpenSentinelURLErrors(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"redis://127.0.0.1:1/0?master_name=",
		"redis://127.0.0.1:1/0?master_name=m&addr=nohostport",
		"redis://127.0.0.1:1/0?master_name=m&password=hidden&bogus=1",
	} {
		_, err := redisstore.Open(context.Background(), u, nil)
		if err == nil || strings.Contains(err.Error(), "hidden") {
			t.Errorf("Open(%s) = %v, want an error that hides the password", u, err)
		}
	}
}

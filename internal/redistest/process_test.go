//go:build unix

package redistest

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestServerIsKilledWhenItsTestEnds: a server started in a subtest answers,
// survives a restart when it has an append-only file, and its process is
// gone once the subtest has ended.
func TestServerIsKilledWhenItsTestEnds(t *testing.T) {
	requirePrograms(t) // here too: a skipped subtest leaves pid 0
	var pid int
	t.Run("Use", func(t *testing.T) {
		s := StartServer(t, ServerOptions{AppendOnly: true, AppendFsync: "always"})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		defer c.Close()
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		s.Kill()
		s.Restart(t)
		if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
			t.Fatalf("after a restart with appendfsync always: %q, %v; want the value", got, err)
		}
		pid = s.cmd.Process.Pid
	})
	if pid == 0 {
		t.Fatal("the subtest did not start a server")
	}
	// A reaped process no longer exists: signal 0 fails with ESRCH.
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("the server's process %d after its test: kill(0) = %v, want ESRCH", pid, err)
	}
}

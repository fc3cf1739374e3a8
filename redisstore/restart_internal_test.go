//go:build unix

package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/redistest"
)

// TestRestartUnderLoad kills a Redis server of the test's own with SIGKILL
// while workers claim and complete keys, restarts it from its files, and
// reads every acknowledged write back.
//
//   - With the append-only file (appendfsync always or everysec), nothing
//     acknowledged is lost: Redis writes the file before it answers, and a
//     killed process leaves its writes to the kernel. (A power loss is
//     another matter for everysec: up to a second of writes, docs/REDIS.md;
//     a test cannot cut the power.)
//   - Without persistence, everything acknowledged before the kill is
//     lost, and everything acknowledged after the restart is kept.
func TestRestartUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts redistest.ServerOptions
	}{
		{"AppendFsyncAlways", redistest.ServerOptions{AppendOnly: true, AppendFsync: "always"}},
		{"AppendFsyncEverysec", redistest.ServerOptions{AppendOnly: true, AppendFsync: "everysec"}},
		{"NoPersistence", redistest.ServerOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t, tc.opts)
			c := redis.NewClient(clientOptions(srv.Addr()))
			t.Cleanup(func() { _ = c.Close() })
			s, err := New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			l, killedAt, restartedAt := faultRun(t, s, 4, func() {
				srv.Kill()
				time.Sleep(300 * time.Millisecond)
				srv.Restart(t)
			})
			x := verify(t, s, l)
			t.Logf("%s: %s; %d errors during the outage", tc.name, x, l.errors.Load())
			if x.claims == 0 {
				t.Fatal("no claim was acknowledged")
			}
			if tc.opts.AppendOnly {
				if len(x.lostClaims)+len(x.lostCompletions)+x.pendingNotFound != 0 {
					t.Fatalf("with the append-only file, a SIGKILL lost acknowledged writes: %s", x)
				}
				return
			}
			var before, after int
			for key, a := range l.keys {
				switch {
				case a.claimedAt.Before(killedAt):
					before++
					if !x.lostClaims[key] {
						t.Errorf("%q, claimed before the kill, survived a restart without persistence", key)
					}
				case a.sentAt.After(restartedAt):
					after++
					if x.lostClaims[key] || x.lostCompletions[key] {
						t.Errorf("%q, claimed after the restart, was lost", key)
					}
				}
			}
			if before == 0 || after == 0 {
				t.Fatalf("claims before the kill %d, after the restart %d: want some of each", before, after)
			}
		})
	}
}

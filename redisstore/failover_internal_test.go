//go:build unix

package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/redistest"
)

func clusterStore(t *testing.T, cl *redistest.Cluster, cfg *Config) *Store {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cl.Addrs(), Password: cl.Password(), DialTimeout: 500 * time.Millisecond, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRedirects: 8,
	})
	t.Cleanup(func() { _ = c.Close() })
	s, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// masterOfKey returns the node that served key's record when the cluster
// started.
func masterOfKey(t *testing.T, s *Store, cl *redistest.Cluster, key string) *redistest.Server {
	t.Helper()
	n, err := cl.MasterOf(context.Background(), s.c.(*redis.ClusterClient), recordKeys(s.member("load", key))[0])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClusterNodeRestartUnderLoad kills one master of a three-master
// cluster (no replicas) with SIGKILL under load and restarts it from its
// files. With appendfsync always nothing acknowledged is lost. Without
// persistence the node comes back owning its slots, empty: exactly the
// records of its slots acknowledged before the kill are lost, and, since
// parts of the pending index lived there too, pending records of other
// nodes may drop out of the index until Reindex puts them back.
func TestClusterNodeRestartUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts redistest.ServerOptions
	}{
		{"AppendFsyncAlways", redistest.ServerOptions{AppendOnly: true, AppendFsync: "always"}},
		{"NoPersistence", redistest.ServerOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := redistest.StartCluster(t, 3, 0, tc.opts)
			s := clusterStore(t, cl, nil)
			victim := cl.Nodes[0]
			// Some records stay pending: claimed, never completed.
			for i := range 50 {
				mustClaimScoped(t, s, "load", "pending-"+itoa(i))
			}
			l, killedAt, restartedAt := faultRun(t, s, 4, func() {
				victim.Kill()
				time.Sleep(300 * time.Millisecond)
				victim.Restart(t)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				if err := cl.WaitOK(ctx); err != nil {
					t.Fatal(err)
				}
			})
			for i := range 50 {
				l.keys["pending-"+itoa(i)] = &ack{token: 1, sentAt: killedAt.Add(-time.Hour), claimedAt: killedAt.Add(-time.Hour)}
			}
			x := verify(t, s, l)
			t.Logf("%s: %s; %d errors during the outage", tc.name, x, l.errors.Load())
			if tc.opts.AppendOnly {
				if len(x.lostClaims)+len(x.lostCompletions)+x.pendingNotFound != 0 {
					t.Fatalf("with appendfsync always, a SIGKILL of a master lost acknowledged writes: %s", x)
				}
				return
			}
			var onVictim int
			for key, a := range l.keys {
				mine := masterOfKey(t, s, cl, key) == victim
				switch {
				case mine && a.claimedAt.Before(killedAt):
					onVictim++
					if !x.lostClaims[key] {
						t.Errorf("%q, on the restarted node and claimed before the kill, survived a restart without persistence", key)
					}
				case !mine || a.sentAt.After(restartedAt):
					if x.lostClaims[key] || x.lostCompletions[key] {
						t.Errorf("%q (on the restarted node: %v) was lost", key, mine)
					}
				}
			}
			if onVictim == 0 {
				t.Fatal("no record acknowledged before the kill was on the killed node")
			}
			n, err := s.Reindex(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			after := verify(t, s, newLedgerOf(l, func(key string) bool { return !x.lostClaims[key] }))
			t.Logf("after Reindex (%d pending records read): %d pending records not in the index", n, after.pendingNotFound)
			if after.pendingNotFound != 0 {
				t.Fatalf("after Reindex, %d surviving pending records are still not in the index", after.pendingNotFound)
			}
		})
	}
}

// TestClusterFailoverUnderLoad kills one master of a cluster of three
// masters with a replica each (no persistence: the replicas are the copy)
// under load; its replica takes over, and the killed node, restarted,
// joins as the new master's replica. Without WAIT, what the master
// acknowledged and had not yet sent to its replica is lost: usually
// nothing on loopback, and, when the replica was cut off (its link closed
// and its password made wrong) 300 ms before the kill, what the master
// acknowledged meanwhile. With WaitReplicas 1, every acknowledged write
// had reached the replica that takes over: nothing acknowledged is lost,
// with or without the cut. (Between the failover and the restart the new
// master has no replica, and its writes fail with ErrNotReplicated.)
func TestClusterFailoverUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait int
		lag  bool // the replica stops receiving 300 ms before the kill
	}{
		{"Async", 0, false},
		{"WaitReplicas1", 1, false},
		{"AsyncLaggingReplica", 0, true},
		{"WaitReplicas1LaggingReplica", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := redistest.StartCluster(t, 3, 1, redistest.ServerOptions{Password: "pw"})
			s := clusterStore(t, cl, &Config{WaitReplicas: tc.wait, WaitTimeout: time.Second})
			victim := cl.Nodes[0]
			probe := keyServedBy(t, s, cl, victim)
			l, killedAt, _ := faultRun(t, s, 4, func() {
				if tc.lag {
					// The replica's link is cut, and it cannot log in
					// again: it falls behind while its master goes on
					// acknowledging.
					ctx := context.Background()
					r := replicaOf(t, cl, victim).Client()
					err := r.ConfigSet(ctx, "masterauth", "wrong").Err()
					_ = r.Close()
					m := victim.Client()
					if err == nil {
						err = m.ClientKillByFilter(ctx, "TYPE", "replica").Err()
					}
					_ = m.Close()
					if err != nil {
						t.Fatal(err)
					}
					time.Sleep(300 * time.Millisecond)
				}
				victim.Kill()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				if err := cl.WaitOK(ctx); err != nil { // the replica has taken over
					t.Fatalf("%v\n%s", err, cl.Describe(context.Background()))
				}
				victim.Restart(t)
				if err := cl.WaitOK(ctx); err != nil { // and has a replica again
					t.Fatalf("%v\n%s", err, cl.Describe(context.Background()))
				}
			})
			promoted := masterOfKey(t, s, cl, probe)
			if promoted == victim {
				t.Fatal("the killed master serves its slots again: no failover happened")
			}
			reader, err := New(s.c, nil) // reads need no WAIT
			if err != nil {
				t.Fatal(err)
			}
			x := verify(t, reader, l)
			var late int
			for key, a := range l.keys {
				if a.sentAt.After(killedAt) && masterOfKey(t, s, cl, key) == promoted {
					late++
				}
			}
			t.Logf("%s: %s; %d errors during the failover; %d claims acknowledged by the promoted replica", tc.name, x, l.errors.Load(), late)
			if late == 0 {
				t.Fatal("no claim was served by the promoted replica after the failover")
			}
			if tc.lag && tc.wait == 0 && len(x.lostClaims) == 0 {
				t.Fatalf("a replica cut off for 300 ms lost nothing its master acknowledged: the fault was not injected (%s)", x)
			}
			if tc.wait > 0 && len(x.lostClaims)+len(x.lostCompletions)+x.pendingNotFound != 0 {
				t.Fatalf("with WaitReplicas 1 a failover lost acknowledged writes: %s", x)
			}
		})
	}
}

// replicaOf returns the replica of master m.
func replicaOf(t *testing.T, cl *redistest.Cluster, m *redistest.Server) *redistest.Server {
	t.Helper()
	ctx := context.Background()
	for _, n := range cl.Nodes {
		c := n.Client()
		info, err := c.Info(ctx, "replication").Result()
		_ = c.Close()
		if err == nil && strings.Contains(info, "master_port:"+strconv.Itoa(m.Port)+"\r\n") {
			return n
		}
	}
	t.Fatalf("no replica of %s", m.Addr())
	return nil
}

// keyServedBy returns a load key whose record the node n serves.
func keyServedBy(t *testing.T, s *Store, cl *redistest.Cluster, n *redistest.Server) string {
	t.Helper()
	for i := range 10000 {
		key := fmt.Sprintf("probe-%d", i)
		if masterOfKey(t, s, cl, key) == n {
			return key
		}
	}
	t.Fatal("no key of the node found")
	return ""
}

func mustClaimScoped(t *testing.T, s *Store, scope, key string) {
	t.Helper()
	p := claimParams(key, time.Now())
	p.Scope = scope
	c, err := s.Claim(context.Background(), p)
	if err != nil || !c.Claimed {
		t.Fatalf("Claim(%q): %+v, %v", key, c, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// newLedgerOf returns a ledger of the keys of l that keep says to keep.
func newLedgerOf(l *ledger, keep func(string) bool) *ledger {
	out := newLedger()
	for k, a := range l.keys {
		if keep(k) {
			out.keys[k] = a
		}
	}
	return out
}

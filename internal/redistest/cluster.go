//go:build unix

package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of servers of the test's own.
type Cluster struct {
	// Nodes are the servers, masters first, in the order given to
	// redis-cli (which makes the first ones masters).
	Nodes []*Server
}

// StartCluster starts masters*(1+replicas) servers in cluster mode, makes
// them a cluster with redis-cli (each master with replicas replicas) and
// waits until every node reports cluster_state:ok. Every server is killed
// when t ends.
func StartCluster(t testing.TB, masters, replicas int, opts ServerOptions) *Cluster {
	t.Helper()
	opts.Cluster = true
	cl := &Cluster{}
	var addrs []string
	for range masters * (1 + replicas) {
		s := StartServer(t, opts)
		cl.Nodes = append(cl.Nodes, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if opts.Password != "" {
		args = append(args, "--no-auth-warning", "-a", opts.Password)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, tail(out))
	}
	if err := cl.WaitOK(ctx); err != nil {
		t.Fatal(err)
	}
	return cl
}

// Password returns the cluster's password ("" for none).
func (cl *Cluster) Password() string { return cl.Nodes[0].opts.Password }

// Addrs returns the nodes' addresses.
func (cl *Cluster) Addrs() []string {
	var out []string
	for _, s := range cl.Nodes {
		out = append(out, s.Addr())
	}
	return out
}

// WaitOK waits until every running node reports cluster_state:ok, all
// 16384 slots served, and a running node as the master of every slot, and
// every running replica is in sync with its master.
func (cl *Cluster) WaitOK(ctx context.Context) error {
	var last error
	for {
		last = cl.ok(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: the cluster is not ok: %w", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (cl *Cluster) ok(ctx context.Context) error {
	running := map[string]bool{}
	for _, s := range cl.Nodes {
		running[s.Addr()] = s.running()
	}
	for _, s := range cl.Nodes {
		if !running[s.Addr()] {
			continue
		}
		c := s.Client()
		info, err := c.ClusterInfo(ctx).Result()
		var shards []redis.ClusterShard
		if err == nil {
			shards, err = c.ClusterShards(ctx).Result()
		}
		var repl string
		if err == nil {
			repl, err = c.Info(ctx, "replication").Result()
		}
		_ = c.Close()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return errors.New(s.Addr() + ": a replica not in sync with its master")
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return errors.New(s.Addr() + ": " + strings.ReplaceAll(strings.TrimSpace(info), "\r\n", " "))
		}
		// A killed master stays in the slot map until the others mark
		// it failed and its replica takes over.
		for _, sh := range shards {
			if len(sh.Slots) == 0 {
				continue
			}
			served := false
			for _, n := range sh.Nodes {
				addr := n.IP + ":" + strconv.FormatInt(n.Port, 10)
				served = served || (n.Role == "master" && n.Health == "online" && running[addr])
			}
			if !served {
				return fmt.Errorf("%s: slots %v have no running master: %+v", s.Addr(), sh.Slots, sh.Nodes)
			}
		}
	}
	return nil
}

// Describe returns CLUSTER NODES as a running node sees it, for messages.
func (cl *Cluster) Describe(ctx context.Context) string {
	for _, s := range cl.Nodes {
		if !s.running() {
			continue
		}
		c := s.Client()
		out, err := c.ClusterNodes(ctx).Result()
		_ = c.Close()
		if err == nil {
			for _, n := range cl.Nodes {
				log, _ := os.ReadFile(filepath.Join(n.Dir, "redis.log"))
				out += "\n--- log of " + n.Addr() + ":\n" + tail(log)
			}
			return out
		}
	}
	return "no node answers"
}

// MasterOf returns the node that serves key's slot as a master now.
func (cl *Cluster) MasterOf(ctx context.Context, c *redis.ClusterClient, key string) (*Server, error) {
	n, err := c.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	addr := n.Options().Addr
	for _, s := range cl.Nodes {
		if s.Addr() == addr {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redistest: the master of %q is %s, not a node of the cluster", key, addr)
}

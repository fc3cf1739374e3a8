//go:build unix

// Package redisproc starts redis-server processes of a test's own, on
// free loopback ports in a temporary directory: single servers and Redis
// Clusters (with or without replicas). A test may kill a server with
// SIGKILL and restart it from its files. Every process is killed (with its
// process group) when the test ends, also when it fails.
//
// When redis-server or redis-cli is missing, the test is skipped, or fails
// under CI=true (see internal/servertest).
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/servertest"
)

// startWait bounds how long a server takes to answer, and a cluster to be
// ready.
const startWait = 60 * time.Second

// Options are the persistence and mode of a server.
type Options struct {
	// AppendOnly turns the append-only file on, with AppendFsync
	// ("always", "everysec" or "no"; "everysec" when empty). Without it,
	// the server keeps nothing across a restart (no RDB snapshots either).
	AppendOnly  bool
	AppendFsync string
	// Cluster starts the server in cluster mode.
	Cluster bool
	// Password, if set, is required of clients (requirepass), and
	// replicas give it to their master (masterauth).
	Password string
	// NodeTimeout is the cluster's node timeout (how long a master may be
	// unreachable before its replica takes over). Defaults to 2 seconds.
	NodeTimeout time.Duration
}

// Server is one redis-server process.
type Server struct {
	Port int
	Dir  string
	opts Options

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Require skips t (fails it under CI=true) when redis-server or
// redis-cli is not installed.
func Require(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			servertest.Missing(t, bin+" is not installed", err)
		}
	}
}

// Start starts a server on a free loopback port in a new temporary
// directory and waits until it answers. It is killed when t ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	Require(t)
	s := &Server{Port: freePort(t, opts.Cluster), Dir: t.TempDir(), opts: opts}
	t.Cleanup(s.Kill)
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

func (s *Server) args() []string {
	o := s.opts
	args := []string{
		"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--save", "", "--protected-mode", "no", "--daemonize", "no",
		"--logfile", filepath.Join(s.Dir, "redis.log"),
		// A replica's first copy starts at once, not 5 seconds later.
		"--repl-diskless-sync-delay", "0",
	}
	if o.Password != "" {
		args = append(args, "--requirepass", o.Password, "--masterauth", o.Password)
	}
	if o.AppendOnly {
		fsync := o.AppendFsync
		if fsync == "" {
			fsync = "everysec"
		}
		args = append(args, "--appendonly", "yes", "--appendfsync", fsync)
	} else {
		args = append(args, "--appendonly", "no")
	}
	if o.Cluster {
		nt := o.NodeTimeout
		if nt == 0 {
			nt = 2 * time.Second
		}
		args = append(args, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(nt.Milliseconds(), 10))
	}
	return args
}

func (s *Server) start() error {
	cmd := exec.Command("redis-server", s.args()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisproc: start redis-server: %w", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	c := s.Client()
	defer c.Close()
	deadline := time.Now().Add(startWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redisproc: redis-server on %s did not answer within %s: %v\n%s", s.Addr(), startWait, err, tail(log))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client returns a new client of the server (with its Password).
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), Password: s.opts.Password, MaxRetries: -1})
}

// running reports whether the server's process is running (not killed).
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Kill kills the server (its process group) with SIGKILL and reaps it. It
// does nothing if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

// Restart starts the killed server again, on its port and from its
// directory, and waits until it answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// freePort returns a loopback port that is free, and whose cluster bus
// port (+10000) is free too when cluster is set.
func freePort(t testing.TB, cluster bool) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !cluster {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			_ = b.Close()
			return port
		}
	}
	t.Fatal("redisproc: no free port")
	return 0
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

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
func StartCluster(t testing.TB, masters, replicas int, opts Options) *Cluster {
	t.Helper()
	opts.Cluster = true
	cl := &Cluster{}
	var addrs []string
	for range masters * (1 + replicas) {
		s := Start(t, opts)
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
		t.Fatalf("redisproc: redis-cli --cluster create: %v\n%s", err, tail(out))
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
			return fmt.Errorf("redisproc: the cluster is not ok: %w", last)
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
	return nil, fmt.Errorf("redisproc: the master of %q is %s, not a node of the cluster", key, addr)
}

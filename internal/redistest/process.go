//go:build unix

package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// ServerOptions are the persistence and mode of a server of the test's
// own.
type ServerOptions struct {
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

// Server is a redis-server process of the test's own (see StartServer).
type Server struct {
	// Port is the server's loopback port.
	Port int
	// Dir is the server's directory, where its files are.
	Dir  string
	opts ServerOptions

	mu  sync.Mutex
	cmd *exec.Cmd
}

// requirePrograms skips t (fails it under CI=true) when redis-server or
// redis-cli is not installed.
func requirePrograms(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			servertest.Missing(t, bin+" is not installed", err)
		}
	}
}

// StartServer starts a redis-server process on a free loopback port in a
// new temporary directory and waits until it answers. It is killed when t
// ends. When redis-server or redis-cli is not installed, the test is
// skipped, or fails under CI=true.
func StartServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	requirePrograms(t)
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
		return fmt.Errorf("redistest: start redis-server: %w", err)
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
			return fmt.Errorf("redistest: redis-server on %s did not answer within %s: %v\n%s", s.Addr(), startWait, err, tail(log))
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
	t.Fatal("redistest: no free port")
	return 0
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

//go:build unix

package redistest

import (
	"context"
	"fmt"
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

// SentinelMaster is the name the sentinels of StartSentinels know the
// master by.
const SentinelMaster = "idem"

// Sentinels is a master, one replica of it and three Redis Sentinels
// watching them, of the test's own (see StartSentinels).
type Sentinels struct {
	Master, Replica *Server
	// Ports are the sentinels' loopback ports.
	Ports []int

	mu   sync.Mutex
	cmds []*exec.Cmd
}

// StartSentinels starts a master and its replica (with opts) and three
// sentinels on free loopback ports, which take the master for down after
// one second without an answer (a quorum of two) and then promote the
// replica. It returns once the replica is in sync and every sentinel
// knows the replica and the two other sentinels. Everything is killed
// when t ends. When redis-server, redis-cli or redis-sentinel is not
// installed, the test is skipped, or fails under CI=true.
func StartSentinels(t testing.TB, opts ServerOptions) *Sentinels {
	t.Helper()
	requirePrograms(t)
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		servertest.Missing(t, "redis-sentinel is not installed", err)
	}
	s := &Sentinels{Master: StartServer(t, opts), Replica: StartServer(t, opts)}
	t.Cleanup(s.kill)
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	rc := s.Replica.Client()
	defer rc.Close()
	if err := rc.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(s.Master.Port)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica not in sync:\n%s", info)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		port := freePort(t, false)
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		lines := []string{
			"port " + strconv.Itoa(port), "bind 127.0.0.1", "protected-mode no", "daemonize no",
			"dir " + dir, "logfile " + filepath.Join(dir, "sentinel.log"),
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", SentinelMaster, s.Master.Port),
			"sentinel down-after-milliseconds " + SentinelMaster + " 1000",
			"sentinel failover-timeout " + SentinelMaster + " 10000",
		}
		if opts.Password != "" {
			lines = append(lines, "sentinel auth-pass "+SentinelMaster+" "+opts.Password)
		}
		if err := os.WriteFile(conf, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("redis-sentinel", conf)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("redistest: start redis-sentinel: %v", err)
		}
		s.mu.Lock()
		s.cmds = append(s.cmds, cmd)
		s.mu.Unlock()
		s.Ports = append(s.Ports, port)
	}
	for _, port := range s.Ports {
		sc := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
		err := waitFor(ctx, func() error {
			replicas, err := sc.Replicas(ctx, SentinelMaster).Result()
			if err != nil {
				return err
			}
			others, err := sc.Sentinels(ctx, SentinelMaster).Result()
			if err != nil {
				return err
			}
			if len(replicas) != 1 || len(others) != 2 {
				return fmt.Errorf("sentinel on %d knows %d replicas and %d sentinels", port, len(replicas), len(others))
			}
			return nil
		})
		_ = sc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// URL returns go-redis's failover URL of database db through the
// sentinels (redis.ParseFailoverURL's form, which redisstore.Open takes).
func (s *Sentinels) URL(db int) string {
	u := fmt.Sprintf("redis://127.0.0.1:%d/%d?master_name=%s", s.Ports[0], db, SentinelMaster)
	for _, p := range s.Ports[1:] {
		u += "&addr=127.0.0.1:" + strconv.Itoa(p)
	}
	if pw := s.Master.opts.Password; pw != "" {
		u += "&password=" + pw
	}
	return u
}

// MasterPort returns the port of the master the first sentinel that
// answers names.
func (s *Sentinels) MasterPort(ctx context.Context) (int, error) {
	var last error
	for _, port := range s.Ports {
		sc := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		_ = sc.Close()
		if err != nil {
			last = err
			continue
		}
		return strconv.Atoi(addr[1])
	}
	return 0, last
}

// WaitFailover waits until the sentinels name the replica the master.
func (s *Sentinels) WaitFailover(ctx context.Context) error {
	return waitFor(ctx, func() error {
		p, err := s.MasterPort(ctx)
		if err != nil {
			return err
		}
		if p != s.Replica.Port {
			return fmt.Errorf("the sentinels still name %d the master", p)
		}
		return nil
	})
}

func (s *Sentinels) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cmd := range s.cmds {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	s.cmds = nil
}

// waitFor calls try every 50ms until it returns nil or ctx ends.
func waitFor(ctx context.Context, try func() error) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Package pgcluster starts a PostgreSQL primary and a streaming standby of
// a test's own, on private loopback ports and in their own data
// directories, for the failover tests: the primary can be killed with
// SIGKILL and the standby promoted.
//
// The binaries are those of PostgreSQL 15 in /usr/lib/postgresql/15/bin,
// or of the directory in IDEM_PG_BIN. PostgreSQL refuses to run as root;
// as root, every program runs as the postgres OS user. A missing binary
// skips the test, or fails it under CI=true.
package pgcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/servertest"
)

// DefaultBin is where the PostgreSQL programs are when IDEM_PG_BIN is not
// set.
const DefaultBin = "/usr/lib/postgresql/15/bin"

// startWait bounds a server's start, a standby's catch-up and a promotion.
const startWait = 60 * time.Second

// Options are the replication of a cluster.
type Options struct {
	// Sync makes the standby synchronous: the primary's commit returns
	// once the standby has flushed its WAL (synchronous_standby_names =
	// '*', synchronous_commit = on). Without it, replication is
	// asynchronous: a commit returns once the primary has it.
	Sync bool
}

// Cluster is a primary and its standby.
type Cluster struct {
	Primary, Standby *Node
	opts             Options
}

// Node is one postgres server of a cluster.
type Node struct {
	// Name is "primary" or "standby".
	Name string
	// Port is the server's loopback port.
	Port int
	// Dir is the server's data directory.
	Dir string

	run *runner
	mu  sync.Mutex
	cmd *exec.Cmd
	log *bytes.Buffer
}

// Start initialises a primary, copies it into a standby with
// pg_basebackup -R, starts both and waits until the standby streams (and,
// with Options.Sync, is the synchronous one). Both are killed and their
// directories removed when t ends.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	r := newRunner(t)
	root, err := os.MkdirTemp("", "idem-pgcluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	if err := r.own(root); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{opts: opts,
		Primary: &Node{Name: "primary", Port: freePort(t), Dir: filepath.Join(root, "primary"), run: r},
		Standby: &Node{Name: "standby", Port: freePort(t), Dir: filepath.Join(root, "standby"), run: r},
	}
	t.Cleanup(c.Stop)
	if out, err := r.command("initdb", "-D", c.Primary.Dir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = ''",
		"wal_level = replica",
		"max_wal_senders = 5",
		"hot_standby = on",
		// The failover tests kill processes, never the machine: what a
		// killed server wrote is in the page cache, so fsync changes
		// nothing they measure and costs the shared machine's disk.
		"fsync = off",
		"shared_buffers = 64MB",
		"max_connections = 100",
	}
	if opts.Sync {
		conf = append(conf, "synchronous_standby_names = '*'", "synchronous_commit = on")
	}
	if err := appendConf(c.Primary.Dir, conf); err != nil {
		t.Fatal(err)
	}
	if err := c.Primary.start(); err != nil {
		t.Fatal(err)
	}
	if out, err := r.command("pg_basebackup", "-D", c.Standby.Dir, "-R", "-X", "stream", "-c", "fast",
		"-h", "127.0.0.1", "-p", strconv.Itoa(c.Primary.Port), "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	// The copy has the primary's settings; only its port differs, and it
	// names itself to the primary.
	if err := appendConf(c.Standby.Dir, []string{"synchronous_standby_names = ''", "primary_conninfo = 'host=127.0.0.1 port=" + strconv.Itoa(c.Primary.Port) + " user=postgres application_name=standby'"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Standby.start(); err != nil {
		t.Fatal(err)
	}
	if err := c.waitStreaming(); err != nil {
		t.Fatal(err)
	}
	return c
}

// DSN returns the URL of database db on the node.
func (n *Node) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.Port, db)
}

// URL returns a multi-host URL of database db naming the primary, then
// the standby, with target_session_attrs=read-write: a client connects to
// whichever of them accepts writes, the standby once it is promoted.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		c.Primary.Port, c.Standby.Port, db)
}

// Stop kills both servers; it is registered as a clean-up by Start.
func (c *Cluster) Stop() {
	c.Primary.Kill()
	c.Standby.Kill()
}

// Kill sends SIGKILL to the node's postmaster and every backend it
// started (its process group), as a machine's sudden loss would stop
// them, and waits for the postmaster to end. Killing a stopped node does
// nothing.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	_ = n.cmd.Wait()
	n.cmd = nil
}

// Promote makes the standby a primary (pg_promote) and waits until it
// accepts writes.
func (n *Node) Promote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: promote %s: %w", n.Name, err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, 60)`).Scan(&ok); err != nil || !ok {
		return fmt.Errorf("pgcluster: promote %s: %v (promoted: %t)", n.Name, err, ok)
	}
	return poll(ctx, func() error {
		var recovery bool
		if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&recovery); err != nil {
			return err
		}
		if recovery {
			return fmt.Errorf("%s still in recovery", n.Name)
		}
		return nil
	})
}

// Log returns what the node's server wrote to its standard error.
func (n *Node) Log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.log == nil {
		return ""
	}
	return n.log.String()
}

func (n *Node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd := n.run.command("postgres", "-D", n.Dir, "-p", strconv.Itoa(n.Port))
	n.log = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: start %s: %w", n.Name, err)
	}
	n.cmd = cmd
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	err := poll(ctx, func() error {
		conn, err := pgx.Connect(ctx, n.DSN("postgres"))
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
	if err != nil {
		return fmt.Errorf("pgcluster: %s on port %d did not answer: %w\n%s", n.Name, n.Port, err, n.log)
	}
	return nil
}

// waitStreaming waits until the primary's pg_stat_replication shows the
// standby streaming, and synchronous with Options.Sync.
func (c *Cluster) waitStreaming() error {
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.Primary.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	want := "async"
	if c.opts.Sync {
		want = "sync"
	}
	err = poll(ctx, func() error {
		var state, syncState string
		err := conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'standby'`).Scan(&state, &syncState)
		if err != nil {
			return err
		}
		if state != "streaming" || syncState != want {
			return fmt.Errorf("standby %s, %s", state, syncState)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgcluster: the standby did not stream (%s): %w\n%s", want, err, c.Standby.Log())
	}
	return nil
}

// runner runs the PostgreSQL programs, as the postgres OS user when the
// test runs as root.
type runner struct {
	bin      string
	uid, gid int // -1 when the programs run as the test's own user
}

func newRunner(t testing.TB) *runner {
	t.Helper()
	r := &runner{bin: os.Getenv("IDEM_PG_BIN"), uid: -1, gid: -1}
	if r.bin == "" {
		r.bin = DefaultBin
	}
	for _, p := range []string{"initdb", "postgres", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(r.bin, p)); err != nil {
			servertest.Missing(t, "PostgreSQL's "+p+" is not installed (set IDEM_PG_BIN to its directory)", err)
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			servertest.Missing(t, "running as root, and there is no postgres OS user to run PostgreSQL as", err)
		}
		r.uid, _ = strconv.Atoi(u.Uid)
		r.gid, _ = strconv.Atoi(u.Gid)
	}
	return r
}

func (r *runner) command(prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(r.bin, prog), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if r.uid >= 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}
		cmd.Env = append(os.Environ(), "HOME="+os.TempDir())
	}
	return cmd
}

// own gives dir to the user the programs run as.
func (r *runner) own(dir string) error {
	if r.uid < 0 {
		return nil
	}
	return os.Chown(dir, r.uid, r.gid)
}

func appendConf(dir string, lines []string) error {
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// poll calls try every 50ms until it returns nil or ctx ends.
func poll(ctx context.Context, try func() error) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Package galeratest starts a throwaway MariaDB Galera cluster on loopback
// ports for tests: its own data directories and configuration, the
// wsrep provider from Debian's galera-4 package, every node stopped and
// every directory removed at clean-up. The shared server on port 3306 is
// never touched.
//
// When mariadbd or the provider is missing, Start skips the test, except
// under CI=true, where it fails it: CI must never pass by skipping.
package galeratest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver the probes use
)

// Provider is where Debian's galera-4 package puts the wsrep provider.
const Provider = "/usr/lib/galera/libgalera_smm.so"

// Cluster is a running cluster. Its methods are not safe for concurrent use.
type Cluster struct {
	t     testing.TB
	dir   string
	owner string // the OS user mariadbd runs as
	Nodes []*Node
}

// Node is one member of the cluster.
type Node struct {
	Index int // from 0
	Port  int // the SQL port on 127.0.0.1
	dir   string
	cmd   *exec.Cmd
	done  chan struct{}
	gcomm int
}

// URL is the node's database in idem's URL form, mysql://root@127.0.0.1:PORT/test.
func (n *Node) URL() string { return fmt.Sprintf("mysql://root@127.0.0.1:%d/test", n.Port) }

// DSN is the node's database in go-sql-driver/mysql's form.
func (n *Node) DSN() string { return fmt.Sprintf("root@tcp(127.0.0.1:%d)/test", n.Port) }

// Running reports whether the node's process is alive.
func (n *Node) Running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Start bootstraps an n-node cluster, creates database test on it, waits
// until every node is synced, and registers its shutdown with t.Cleanup.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	_, err := exec.LookPath("mariadbd")
	if err == nil {
		_, err = os.Stat(Provider)
	}
	if err == nil {
		_, err = exec.LookPath("rsync")
	}
	if err != nil {
		msg := fmt.Sprintf("galeratest: mariadbd, rsync and %s are needed (apt-get install mariadb-server galera-4 rsync): %v", Provider, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir, err := os.MkdirTemp("", "idem-galera-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, dir: dir, owner: owner()}
	t.Cleanup(c.stop)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 4*n)
	var peers []string
	for i := 0; i < n; i++ {
		node := &Node{Index: i, Port: ports[4*i], gcomm: ports[4*i+1], dir: filepath.Join(dir, "n"+strconv.Itoa(i))}
		c.Nodes = append(c.Nodes, node)
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(node.gcomm))
	}
	for i, node := range c.Nodes {
		if err := os.MkdirAll(filepath.Join(node.dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		cnf := config(node, c.owner, strings.Join(peers, ","), ports[4*i+2], ports[4*i+3])
		if err := os.WriteFile(filepath.Join(node.dir, "my.cnf"), []byte(cnf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	install := exec.Command("mariadb-install-db", "--no-defaults",
		"--datadir="+filepath.Join(c.Nodes[0].dir, "data"), "--user="+c.owner,
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("galeratest: mariadb-install-db: %v\n%s", err, out)
	}
	c.chown()
	first := c.Nodes[0]
	c.launch(first, true, "")
	c.waitReady(first, 1)
	if err := createTest(first); err != nil {
		t.Fatalf("galeratest: create database test: %v", err)
	}
	// The other nodes join by a full state transfer (rsync) from the first.
	for _, node := range c.Nodes[1:] {
		c.launch(node, false, "")
	}
	for _, node := range c.Nodes {
		c.waitSynced(node, n)
	}
	return c
}

// Open returns a pool on node i's database test, closed at clean-up. Its
// connections read causally (wsrep_sync_wait=1): a read on one node waits
// until that node applied what the cluster committed before it.
func (c *Cluster) Open(i int) *sql.DB {
	c.t.Helper()
	db, err := sql.Open("mysql", c.Nodes[i].DSN()+"?wsrep_sync_wait=1")
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = db.Close() })
	return db
}

// Kill sends SIGKILL to node i and waits for the process to end.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	node := c.Nodes[i]
	if !node.Running() {
		return
	}
	_ = node.cmd.Process.Signal(syscall.SIGKILL)
	<-node.done
}

// Restart starts a stopped node i again and waits until it has rejoined
// the cluster of size n and is synced.
func (c *Cluster) Restart(i, n int) {
	c.t.Helper()
	node := c.Nodes[i]
	if node.Running() {
		c.t.Fatalf("galeratest: node %d is running", i)
	}
	c.launch(node, false, c.recover(node))
	c.waitSynced(node, n)
}

// recover reads the last committed position from the data directory of a
// node that was killed, as mysqld_safe does, so that the node rejoins by
// an incremental transfer from a peer's cache instead of a full copy.
func (c *Cluster) recover(node *Node) string {
	c.t.Helper()
	out, err := exec.Command("mariadbd", "--defaults-file="+filepath.Join(node.dir, "my.cnf"),
		"--wsrep-recover", "--log-error="+filepath.Join(node.dir, "recover.log")).CombinedOutput()
	if err != nil {
		c.t.Logf("galeratest: node %d: wsrep-recover: %v\n%s", node.Index, err, out)
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(node.dir, "recover.log"))
	const mark = "Recovered position: "
	i := strings.LastIndex(string(b), mark)
	if i < 0 {
		return ""
	}
	pos, _, _ := strings.Cut(string(b[i+len(mark):]), "\n")
	return strings.TrimSpace(pos)
}

// WaitSynced waits until every running node sees a cluster of n nodes and
// is synced.
func (c *Cluster) WaitSynced(n int) {
	c.t.Helper()
	for _, node := range c.Nodes {
		if node.Running() {
			c.waitSynced(node, n)
		}
	}
}

func (c *Cluster) launch(node *Node, bootstrap bool, position string) {
	c.t.Helper()
	args := []string{"--defaults-file=" + filepath.Join(node.dir, "my.cnf")}
	if bootstrap {
		args = append(args, "--wsrep-new-cluster")
	}
	if position != "" {
		args = append(args, "--wsrep-start-position="+position)
	}
	log, err := os.OpenFile(filepath.Join(node.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command("mariadbd", args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("galeratest: start node %d: %v", node.Index, err)
	}
	node.cmd, node.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); _ = log.Close(); close(done) }(node.done)
}

// waitReady waits until node answers SQL and sees a cluster of n.
func (c *Cluster) waitReady(node *Node, n int) { c.wait(node, n, false) }

func (c *Cluster) waitSynced(node *Node, n int) { c.wait(node, n, true) }

func (c *Cluster) wait(node *Node, n int, synced bool) {
	c.t.Helper()
	start := time.Now()
	defer func() {
		c.t.Logf("galeratest: node %d ready (size %d) after %v", node.Index, n, time.Since(start).Round(time.Millisecond))
	}()
	deadline := time.Now().Add(120 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if !node.Running() {
			c.t.Fatalf("galeratest: node %d exited while starting:\n%s", node.Index, c.tail(node))
		}
		size, state, err := status(node)
		if err == nil && size == n && (!synced || state == "Synced") {
			return
		}
		if err == nil {
			err = fmt.Errorf("cluster size %d, state %q", size, state)
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	c.t.Fatalf("galeratest: node %d not ready within 120 s: %v\n%s", node.Index, last, c.tail(node))
}

func createTest(node *Node) error {
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", node.Port))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec("CREATE DATABASE IF NOT EXISTS test CHARACTER SET utf8mb4")
	return err
}

func status(node *Node) (size int, state string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", node.Port))
	if err != nil {
		return 0, "", err
	}
	defer db.Close()
	var name string
	if err := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size); err != nil {
		return 0, "", err
	}
	if err := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state); err != nil {
		return 0, "", err
	}
	return size, state, nil
}

// tail returns the end of node's error log, for failure messages.
func (c *Cluster) tail(node *Node) string {
	b, err := os.ReadFile(filepath.Join(node.dir, "err.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (c *Cluster) stop() {
	for _, node := range c.Nodes {
		if node.Running() {
			_ = syscall.Kill(-node.cmd.Process.Pid, syscall.SIGKILL)
			select {
			case <-node.done:
			case <-time.After(10 * time.Second):
			}
		}
	}
	if c.t.Failed() && os.Getenv("IDEM_GALERA_KEEP") != "" {
		c.t.Logf("galeratest: kept %s", c.dir)
		return
	}
	_ = os.RemoveAll(c.dir)
}

// chown gives the directories to the server's OS user when we run as root:
// mariadbd refuses to run as root, and the rsync state transfer drops its
// privileges.
func (c *Cluster) chown() {
	if os.Geteuid() != 0 {
		return
	}
	if out, err := exec.Command("chown", "-R", c.owner+":", c.dir).CombinedOutput(); err != nil {
		c.t.Fatalf("galeratest: chown: %v\n%s", err, out)
	}
}

func owner() string {
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("mysql"); err == nil {
			return "mysql"
		}
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "mysql"
}

func config(node *Node, owner, peers string, ist, sst int) string {
	d := node.dir
	return fmt.Sprintf(`[mysqld]
datadir=%[1]s/data
socket=%[1]s/sock
pid-file=%[1]s/pid
log-error=%[1]s/err.log
port=%[2]d
bind-address=127.0.0.1
user=%[3]s
skip-name-resolve
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=64M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=2
max_connections=400
wsrep_on=ON
wsrep_provider=%[4]s
wsrep_cluster_name=idemtest
wsrep_cluster_address=gcomm://%[5]s
wsrep_node_address=127.0.0.1:%[6]d
wsrep_node_name=n%[7]d
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:%[6]d;ist.recv_addr=127.0.0.1:%[8]d;gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S"
wsrep_sst_receive_address=127.0.0.1:%[9]d
wsrep_sst_method=rsync
`, d, node.Port, owner, Provider, peers, node.gcomm, node.Index, ist, sst)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

package natstest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultServer is the nats-server program StartCluster runs when
// IDEM_NATS_SERVER is not set.
const DefaultServer = "/usr/sbin/nats-server"

// Cluster is a JetStream cluster of nats-server processes on loopback,
// each with its own store directory under the test's temporary directory.
// Its methods are for the test goroutine.
type Cluster struct {
	t       testing.TB
	program string
	name    string
	nodes   []*node
}

type node struct {
	name        string
	port, route int
	dir, log    string
	cmd         *exec.Cmd
	exited      chan struct{}
}

// StartCluster starts n nats-server processes (n ≥ 3 for a JetStream
// cluster that survives the loss of one) forming one JetStream cluster on
// free loopback ports, waits until JetStream answers, and kills them all
// at clean-up. When the program is missing, the test is skipped, or fails
// under CI=true.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	program := os.Getenv("IDEM_NATS_SERVER")
	if program == "" {
		program = DefaultServer
	}
	if _, err := exec.LookPath(program); err != nil {
		missing(t, "nats-server is not available (set IDEM_NATS_SERVER)", err)
	}
	ports := freePorts(t, 2*n)
	dir := t.TempDir()
	c := &Cluster{t: t, program: program, name: strings.ToLower(Name(t))}
	for i := range n {
		nd := &node{
			name:  fmt.Sprintf("%s-n%d", c.name, i+1),
			port:  ports[2*i],
			route: ports[2*i+1],
			dir:   filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
		}
		nd.log = nd.dir + ".log"
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	for i := range c.nodes {
		c.Start(i)
	}
	c.WaitReady(60 * time.Second)
	return c
}

// URL returns every node's client URL, comma-separated, as nats.Connect
// takes a cluster.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.NodeURL(i)
	}
	return strings.Join(urls, ",")
}

// NodeURL returns node i's client URL.
func (c *Cluster) NodeURL(i int) string {
	return "nats://127.0.0.1:" + strconv.Itoa(c.nodes[i].port)
}

// NodeName returns node i's server name, as stream and consumer infos name
// their leaders and peers.
func (c *Cluster) NodeName(i int) string { return c.nodes[i].name }

// Len returns the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Start starts node i, which must not be running, with its ports and store
// directory: a killed node restarts with what it had written.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	if nd.cmd != nil {
		c.t.Fatalf("natstest: node %d is already running", i)
	}
	routes := make([]string, 0, len(c.nodes)-1)
	for j, o := range c.nodes {
		if j != i {
			routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(o.route))
		}
	}
	log, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(c.program,
		"-a", "127.0.0.1", "-p", strconv.Itoa(nd.port),
		"-n", nd.name,
		"-js", "-sd", nd.dir,
		"--cluster_name", c.name,
		"--cluster", "nats://127.0.0.1:"+strconv.Itoa(nd.route),
		"--routes", strings.Join(routes, ","),
	)
	cmd.Stdout, cmd.Stderr = log, log
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("natstest: start %s: %v", c.program, err)
	}
	nd.cmd, nd.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(nd.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(nd.port), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-nd.exited:
			c.t.Fatalf("natstest: %s exited at start:\n%s", nd.name, c.Log(i))
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: %s does not listen on %d after 30 s:\n%s", nd.name, nd.port, c.Log(i))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill kills node i with SIGKILL and waits until it has exited.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	if c.nodes[i].cmd == nil {
		c.t.Fatalf("natstest: node %d is not running", i)
	}
	c.stop(i)
}

func (c *Cluster) stop(i int) {
	nd := c.nodes[i]
	if nd.cmd == nil {
		return
	}
	_ = nd.cmd.Process.Kill()
	<-nd.exited
	nd.cmd = nil
}

// Log returns node i's log so far, for a failing test to show.
func (c *Cluster) Log(i int) string {
	b, err := os.ReadFile(c.nodes[i].log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// WaitReady waits until every running node answers a JetStream request
// (the cluster has a meta leader and the node knows it), or fails the test
// after d.
func (c *Cluster) WaitReady(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for i, nd := range c.nodes {
		if nd.cmd == nil {
			continue
		}
		var last error
		for {
			if last = jetStreamAnswers(c.NodeURL(i)); last == nil {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("natstest: JetStream on %s not ready after %s: %v\n%s", nd.name, d, last, c.Log(i))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func jetStreamAnswers(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

package natstest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Server is one private nats-server process with JetStream, on a free
// loopback port and a store directory under the test's temporary
// directory, that a test may stop and start again (it keeps its port and
// what it stored). Its methods are for the test goroutine.
type Server struct {
	t       testing.TB
	program string
	port    int
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// StartServer starts a private server and stops it at clean-up. When the
// program is missing, the test is skipped, or fails under CI=true. Never
// use it to stand in for the shared server: it is for tests that kill
// their broker.
func StartServer(t testing.TB) *Server {
	t.Helper()
	program := os.Getenv("IDEM_NATS_SERVER")
	if program == "" {
		program = DefaultServer
	}
	if _, err := exec.LookPath(program); err != nil {
		missing(t, "nats-server is not available (set IDEM_NATS_SERVER)", err)
	}
	s := &Server{t: t, program: program, port: freePorts(t, 1)[0], dir: filepath.Join(t.TempDir(), "js")}
	t.Cleanup(func() {
		if s.cmd != nil {
			s.Kill()
		}
	})
	s.Start()
	return s
}

// URL returns the server's client URL.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// Start starts the server, which must not be running, and waits until
// JetStream answers.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("natstest: the server is already running")
	}
	cmd := exec.Command(s.program, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("natstest: start %s: %v", s.program, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), time.Second); err == nil {
			conn.Close()
			if jetStreamAnswers(s.URL()) == nil {
				return
			}
		}
		select {
		case <-s.exited:
			s.t.Fatal("natstest: the private server exited at start")
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("natstest: the private server's JetStream does not answer on %d after 30 s", s.port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill kills the server with SIGKILL and waits until it has exited.
func (s *Server) Kill() {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatal("natstest: the server is not running")
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"
)

// server is the service under test, run as a child process so that it can
// be killed with SIGKILL and started again on the same database and port.
type server struct {
	binary string
	args   []string
	addr   string
	log    io.Writer

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been reaped
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start starts the server and waits until /healthz answers.
func (s *server) start(ctx context.Context) error {
	cmd := exec.Command(s.binary, append([]string{"serve", "-addr", s.addr}, s.args...)...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	exited := make(chan error, 1)
	reaped := make(chan struct{})
	go func() { exited <- cmd.Wait(); close(reaped) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, reaped
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("server exited at start: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		res, err := http.Get("http://" + s.addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return fmt.Errorf("server did not answer /healthz on %s within 30s", s.addr)
}

// kill kills the server with SIGKILL: no shutdown, no flush, in the middle
// of whatever it was doing.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Kill)
		// Wait until the process is gone, so that everything it held
		// (its port, the SQLite file's writer lock) is free again.
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
		}
		s.cmd = nil
	}
}

// stop ends the server at the end of a mode.
func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() {
			for range 100 {
				if _, err := net.DialTimeout("tcp", s.addr, 50*time.Millisecond); err != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			close(done)
		}()
		<-done
		_ = s.cmd.Process.Kill()
		s.cmd = nil
	}
}

// FreeAddr returns a loopback address whose port is free right now.
func FreeAddr() (string, error) { return freeAddr() }

package faultproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// patience bounds what should happen at once on loopback; quiet is how
// long the tests watch for what should not happen.
const (
	patience = 30 * time.Second
	quiet    = 200 * time.Millisecond
)

// setup starts a target on loopback and a proxy in front of it. The
// target's side of each connection through the proxy arrives on the
// channel.
func setup(t *testing.T) (*Proxy, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return New(t, ln.Addr().String()), accepted
}

// connect opens a connection through p and returns both of its ends.
func connect(t *testing.T, p *Proxy, accepted <-chan net.Conn) (client, server net.Conn) {
	t.Helper()
	client, err := p.Dial(t.Context(), "tcp", "ignored:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	select {
	case server = <-accepted:
		t.Cleanup(func() { server.Close() })
	case <-time.After(patience):
		t.Fatal("the proxy did not connect to the target")
	}
	return client, server
}

// linked opens a connection through p, as connect does, and returns once
// a first byte has gone through it: the proxy has it in hand.
func linked(t *testing.T, p *Proxy, accepted <-chan net.Conn) (client, server net.Conn) {
	t.Helper()
	client, server = connect(t, p, accepted)
	send(t, client, "x")
	receive(t, server, "x")
	return client, server
}

// cut calls p.Cut and fails unless it closed want connections.
func cut(t *testing.T, p *Proxy, want int) {
	t.Helper()
	if got := p.Cut(); got != want {
		t.Errorf("Cut() = %d, want %d", got, want)
	}
}

func send(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

// receive reads len(want) bytes from c and fails unless they are want.
func receive(t *testing.T, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}

// silent fails unless a read from c times out: nothing arrives, and the
// connection does not end either.
func silent(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(quiet))
	if n, err := c.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: read %d bytes, %v; want a timeout", what, n, err)
	}
}

// ended fails unless c reaches its end (EOF or a reset) soon.
func ended(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	for {
		_, err := c.Read(make([]byte, 64))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: the connection did not end", what)
		}
		if err != nil {
			return
		}
	}
}

// The proxy forwards both ways; while it holds, nothing goes through
// either way, no socket is closed, and a connection made meanwhile is held
// too; on Resume, what was held arrives in order.
func TestHoldAndResume(t *testing.T) {
	t.Parallel()
	p, accepted := setup(t)
	client, server := connect(t, p, accepted)
	send(t, client, "ping")
	receive(t, server, "ping")
	send(t, server, "pong")
	receive(t, client, "pong")

	p.Hold()
	p.Hold() // a second Hold changes nothing
	send(t, client, "up-1")
	send(t, client, "up-2")
	send(t, server, "down")
	silent(t, server, "the target while held")
	silent(t, client, "the client while held")
	late, lateServer := connect(t, p, accepted)
	send(t, late, "late")
	silent(t, lateServer, "a connection made while held")

	p.Resume()
	p.Resume() // a second Resume changes nothing
	receive(t, server, "up-1up-2")
	receive(t, client, "down")
	receive(t, lateServer, "late")
	send(t, client, "again")
	receive(t, server, "again")
}

// While the proxy holds, not even a close goes through: the other end
// sees it only on Resume.
func TestHoldKeepsACloseBack(t *testing.T) {
	t.Parallel()
	p, accepted := setup(t)
	client, server := connect(t, p, accepted)
	p.Hold()
	client.Close()
	silent(t, server, "the target after the client closed, while held")
	p.Resume()
	ended(t, server, "the target after Resume")
}

// Cut closes both ends of every connection through the proxy, and says
// how many; a connection made afterwards goes through.
func TestCut(t *testing.T) {
	t.Parallel()
	p, accepted := setup(t)
	var clients, servers []net.Conn
	for range 2 {
		c, s := linked(t, p, accepted)
		clients, servers = append(clients, c), append(servers, s)
	}
	cut(t, p, 2)
	for i := range clients {
		ended(t, clients[i], "a client after Cut")
		ended(t, servers[i], "the target after Cut")
	}
	cut(t, p, 0)
	c, s := connect(t, p, accepted)
	send(t, c, "after")
	receive(t, s, "after")
	cut(t, p, 1)
}

// A connection that ended by itself is not counted by Cut.
func TestCutCountsOpenConnections(t *testing.T) {
	t.Parallel()
	p, accepted := setup(t)
	c, s := linked(t, p, accepted)
	s.Close()
	ended(t, c, "the client after the target closed")
	cut(t, p, 0)
}

// Cut ends held connections too, at once, as a reset does.
func TestCutWhileHeld(t *testing.T) {
	t.Parallel()
	p, accepted := setup(t)
	client, server := linked(t, p, accepted)
	p.Hold()
	send(t, client, "held")
	cut(t, p, 1)
	ended(t, client, "a held client after Cut")
	ended(t, server, "the target after Cut")
}

// After Close, the connections through the proxy are closed and new ones
// are refused; a second Close does nothing.
func TestClose(t *testing.T) {
	t.Parallel()
	p, accepted := setup(t)
	client, server := linked(t, p, accepted)
	p.Hold() // Close does not wait for a Resume
	p.Close()
	ended(t, client, "a client after Close")
	ended(t, server, "the target after Close")
	if c, err := p.Dial(t.Context(), "tcp", ""); err == nil {
		c.Close()
		t.Error("a connection to a closed proxy was accepted")
	}
	p.Close()
}

// When the target does not answer, the client's connection is closed.
func TestUnreachableTarget(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := New(t, target)
	c, err := p.Dial(t.Context(), "tcp", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ended(t, c, "a client of a proxy to nowhere")
	cut(t, p, 0)
}

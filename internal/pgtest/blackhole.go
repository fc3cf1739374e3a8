package pgtest

import (
	"context"
	"net"
	"sync"
	"testing"
)

// Blackhole is a TCP proxy on loopback that can stop forwarding, both
// ways, while it keeps both sockets of every connection open: what a host
// that lost power or a partitioned network looks like to the other end,
// which sees no reset and no close, only silence. Nothing is dropped:
// what arrives meanwhile is held (in the proxy and the kernels' buffers)
// and goes through, in order, on Resume.
type Blackhole struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	holding bool
	resumed chan struct{} // closed by Resume
	conns   []net.Conn
	closed  bool
}

// NewBlackhole starts a proxy to target (host:port), forwarding until
// Hold. It is closed at t's clean-up, with every connection through it.
func NewBlackhole(t testing.TB, target string) *Blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Blackhole{ln: ln, target: target, resumed: make(chan struct{})}
	close(b.resumed)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

// Addr is the proxy's host:port.
func (b *Blackhole) Addr() string { return b.ln.Addr().String() }

// Dial connects to the proxy whatever address it is given: use it as a
// pgx DialFunc, so that every connection of a pool goes through the proxy.
func (b *Blackhole) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", b.Addr())
}

// Hold stops forwarding, both ways, on every connection, present and
// future. No socket is closed.
func (b *Blackhole) Hold() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.holding {
		b.holding = true
		b.resumed = make(chan struct{})
	}
}

// Resume forwards again what was held, and what comes next.
func (b *Blackhole) Resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holding {
		b.holding = false
		close(b.resumed)
	}
}

// wait returns once the proxy forwards, or false when it is closed.
func (b *Blackhole) wait() bool {
	b.mu.Lock()
	ch, closed := b.resumed, b.closed
	b.mu.Unlock()
	if closed {
		return false
	}
	<-ch
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.closed
}

func (b *Blackhole) accept() {
	for {
		client, err := b.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", b.target)
		if err != nil {
			client.Close()
			continue
		}
		if !b.track(client, server) {
			return
		}
		go b.pipe(client, server)
		go b.pipe(server, client)
	}
}

func (b *Blackhole) track(conns ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	b.conns = append(b.conns, conns...)
	return true
}

// pipe copies src to dst. Each chunk read, and the end of src, wait for
// the proxy to forward: while it holds, nothing reaches dst, not even a
// close. The end of either side closes both.
func (b *Blackhole) pipe(src, dst net.Conn) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !b.wait() {
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (b *Blackhole) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	conns := b.conns
	if b.holding {
		close(b.resumed) // let the pipes see closed and end
	}
	b.mu.Unlock()
	b.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}

// Package faultproxy is a TCP proxy on loopback that puts network faults
// between a test's clients and a server, without touching the server
// (which other tests may share):
//
//   - [Proxy.Hold] stops forwarding, both ways, while every socket stays
//     open: what a host that lost power or a partitioned network looks
//     like to the other end, which sees no reset and no close, only
//     silence. Nothing is dropped; [Proxy.Resume] delivers what was held,
//     in order.
//   - [Proxy.Cut] closes every connection through the proxy, both ways,
//     as a server restart or a reset does. New connections go through.
//   - [Proxy.Close] also stops listening: the server is gone, and new
//     connections are refused.
package faultproxy

import (
	"context"
	"net"
	"sync"
	"testing"
)

// Proxy forwards the connections it accepts on loopback to a target.
// Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	ctx    context.Context // ends at Close, for the dials to the target
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	holding bool
	resumed chan struct{} // closed while the proxy forwards
	links   map[*link]struct{}
	closed  bool
}

// link is one connection through the proxy: the socket accepted from the
// client and the one dialled to the target.
type link struct {
	client, server net.Conn
	once           sync.Once
	gone           chan struct{} // closed when both sockets are
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.gone)
		l.client.Close()
		l.server.Close()
	})
}

// New starts a proxy to target (host:port) on a free loopback port,
// forwarding until Hold. It is closed at t's clean-up.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln: ln, target: target, ctx: ctx, cancel: cancel,
		resumed: make(chan struct{}), links: make(map[*link]struct{}),
	}
	close(p.resumed)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port, for clients to connect to in place of
// the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Dial connects to the proxy whatever address it is given, so that it can
// serve as a client's dial function (pgx's DialFunc, for one) and every
// connection of a pool goes through the proxy.
func (p *Proxy) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", p.Addr())
}

// Hold stops forwarding, both ways, on every connection, present and
// future, until Resume. No socket is closed, and nothing is dropped.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holding {
		p.holding = true
		p.resumed = make(chan struct{})
	}
}

// Resume forwards what was held, in order, and what comes next.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding {
		p.holding = false
		close(p.resumed)
	}
}

// Cut closes both sockets of every connection through the proxy, and
// returns how many connections it closed. Held bytes are dropped with
// them. New connections go through as before (or are held, while the
// proxy holds).
func (p *Proxy) Cut() int {
	p.mu.Lock()
	links := p.links
	p.links = make(map[*link]struct{})
	p.mu.Unlock()
	for l := range links {
		l.close()
	}
	return len(links)
}

// Close stops listening, so that new connections are refused, closes
// every connection through the proxy, and returns once every goroutine of
// the proxy has ended. Closing a closed proxy does nothing.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.connect(c)
	}
}

// connect dials the target for the client c and starts the two pipes.
// When the target cannot be reached, c is closed.
func (p *Proxy) connect(c net.Conn) {
	defer p.wg.Done()
	var d net.Dialer
	s, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	l := &link{client: c, server: s, gone: make(chan struct{})}
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.links[l] = struct{}{}
		p.wg.Add(2)
	}
	p.mu.Unlock()
	if closed {
		l.close()
		return
	}
	go p.pipe(l, c, s)
	go p.pipe(l, s, c)
}

// pipe copies src to dst. Each chunk read, and the end of src, wait while
// the proxy holds: nothing reaches dst meanwhile, not even a close. The
// end of either side closes the link, both ways.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	defer p.wg.Done()
	defer p.drop(l)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.wait(l) {
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

// wait returns true once the proxy forwards, or false when l is closed
// first.
func (p *Proxy) wait(l *link) bool {
	p.mu.Lock()
	resumed := p.resumed
	p.mu.Unlock()
	select {
	case <-resumed:
	case <-l.gone:
		return false
	}
	select {
	case <-l.gone:
		return false
	default:
		return true
	}
}

// drop forgets l, so that Cut no longer counts it, and closes it.
func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

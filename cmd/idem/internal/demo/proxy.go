package demo

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the faulty network does to one request.
type Fault int

// The faults, in the order of FaultNames.
const (
	FaultNone       Fault = iota
	FaultDrop             // the server processed the request; the response is lost
	FaultDelay            // the response arrives after the client gave up
	FaultReset            // the connection is reset before the request arrives
	FaultServerGone       // the server was down (killed): 502
	numFaults
)

// FaultNames names the faults for reports.
var FaultNames = [numFaults]string{"none", "dropped", "delayed", "reset", "server-down"}

// proxy is the faulty network between the clients and the server: an HTTP
// proxy on loopback that forwards each request and, by a seeded draw,
// drops the response after the server processed it, delays it past the
// client's timeout, or resets the connection before forwarding.
type proxy struct {
	target    string // host:port of the server
	delay     time.Duration
	transport *http.Transport

	mu  sync.Mutex
	rng *rand.Rand

	counts [numFaults]atomic.Int64

	// timeline, if set, records every attempt of an intent.
	timeline *Timeline
}

func newProxy(target string, seed uint64, delay time.Duration) *proxy {
	return &proxy{
		target:    target,
		delay:     delay,
		rng:       rand.New(rand.NewPCG(seed, 0x1de)),
		transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
	}
}

// draw picks the fault for one request: 55% none, 20% dropped, 15% delayed,
// 10% reset.
func (p *proxy) draw() Fault {
	p.mu.Lock()
	n := p.rng.IntN(100)
	p.mu.Unlock()
	switch {
	case n < 55:
		return FaultNone
	case n < 75:
		return FaultDrop
	case n < 90:
		return FaultDelay
	default:
		return FaultReset
	}
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fault := FaultNone
	if r.Method == http.MethodPost {
		fault = p.draw()
	}
	trace := p.timeline.begin(r)
	status, replayed := 0, false
	defer func() { trace.end(fault, status, replayed) }()
	if fault == FaultReset {
		p.counts[FaultReset].Add(1)
		hangUp(w, true)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		hangUp(w, true)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	res, err := p.transport.RoundTrip(out)
	if err != nil {
		fault = FaultServerGone
		p.counts[FaultServerGone].Add(1)
		w.Header().Set("Retry-After", "0")
		http.Error(w, "server unreachable", http.StatusBadGateway)
		return
	}
	resBody, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		fault = FaultServerGone
		p.counts[FaultServerGone].Add(1)
		http.Error(w, "server went away", http.StatusBadGateway)
		return
	}
	status, replayed = res.StatusCode, res.Header.Get("Idempotent-Replayed") == "true"
	p.counts[fault].Add(1)
	switch fault {
	case FaultDrop:
		hangUp(w, false)
		return
	case FaultDelay:
		t := time.NewTimer(p.delay)
		select {
		case <-t.C:
		case <-r.Context().Done(): // the client gave up, as intended
			t.Stop()
			return
		}
	}
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(resBody)
}

// hangUp closes the client's connection without a response; with reset it
// sends a TCP RST instead of a FIN.
func hangUp(w http.ResponseWriter, reset bool) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func (p *proxy) faults() map[string]int64 {
	m := make(map[string]int64, numFaults)
	for i := range numFaults {
		m[FaultNames[i]] = p.counts[i].Load()
	}
	return m
}

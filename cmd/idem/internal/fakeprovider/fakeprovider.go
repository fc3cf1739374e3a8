// Package fakeprovider is a payment provider for the tests of payouts: a
// real HTTP server that takes POST /charges {"account","amount","reference"}
// and honours the Idempotency-Key header the way a mature provider does,
// counts the charges it applies per key, and can be told to fail in the
// ways a real provider fails: a 5xx before applying, an answer that comes
// too late after applying, a connection cut after applying, a redirect
// after applying, a request held until the test lets it go, and declines.
//
// Its key rules: a request whose key has been seen with the same body gets
// the first answer again and applies nothing; one with another body is
// answered 422 and applies nothing; requests with one key are handled one
// at a time. A request without a key is answered 400.
package fakeprovider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what the provider does with one request, instead of answering
// it normally.
type Fault int

const (
	// None answers normally.
	None Fault = iota
	// ServerError answers 503 before applying anything: the key stays
	// unused, so a retry with it applies the charge.
	ServerError
	// TimeoutAfterApply applies the charge (and records its answer for
	// the key), then waits Config.Delay before answering: longer than the
	// caller's timeout, so the caller does not know the charge exists.
	TimeoutAfterApply
	// ResetAfterApply applies the charge, then cuts the connection
	// without an answer.
	ResetAfterApply
	// Hold tells Held about the request, then holds it until Release,
	// before applying it; it is applied and answered (to whoever is
	// still listening) once released.
	Hold
	// HoldThenDrop holds the request as Hold does, then drops it once
	// released: the connection is cut and nothing is applied, as if the
	// request had never reached the provider.
	HoldThenDrop
	// SeeOtherAfterApply applies the charge, then answers 303 See Other
	// to MovedPath, whose GET answers 404: a client that follows it sees
	// a 404 for a charge that exists.
	SeeOtherAfterApply
	// FoundAfterApply applies the charge, then answers 302 Found to
	// StatusPath, whose GET answers 200 {"id":"status-page"}: a client
	// that follows it sees a success with an id that names no charge.
	FoundAfterApply
)

// The targets of the redirect faults. Every GET the provider receives is
// counted (Gets).
const (
	MovedPath  = "/charges/moved"
	StatusPath = "/status"
)

func (f Fault) String() string {
	switch f {
	case None:
		return "none"
	case ServerError:
		return "server-error"
	case TimeoutAfterApply:
		return "timeout-after-apply"
	case ResetAfterApply:
		return "reset-after-apply"
	case Hold:
		return "hold"
	case HoldThenDrop:
		return "hold-then-drop"
	case SeeOtherAfterApply:
		return "see-other-after-apply"
	case FoundAfterApply:
		return "found-after-apply"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Config configures a Provider. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Decline reports whether a charge of account is declined (answered
	// 402, nothing applied). Defaults to accounts whose id starts with
	// "decline".
	Decline func(account string) bool
	// Delay is how long TimeoutAfterApply waits before answering.
	// Defaults to 10 seconds.
	Delay time.Duration
	// IgnoreKeys makes the provider ignore Idempotency-Key: every request
	// applies a new charge, as a provider that does not honour keys
	// would. Defaults to false.
	IgnoreKeys bool
}

// Charge is one charge the provider applied.
type Charge struct {
	ID        string `json:"id"`
	Account   string `json:"account"`
	Amount    int64  `json:"amount"`
	Reference string `json:"reference"`
	// Key is the Idempotency-Key it was applied under.
	Key string `json:"-"`
}

// request is the body of POST /charges.
type request struct {
	Account   string `json:"account"`
	Amount    int64  `json:"amount"`
	Reference string `json:"reference"`
}

// answer is a recorded answer for a key.
type answer struct {
	body   []byte // the request body it answers
	status int
	resp   []byte
}

// Provider is the fake provider: an http.Handler. It is safe for
// concurrent use.
type Provider struct {
	cfg Config

	mu       sync.Mutex
	keys     map[string]*sync.Mutex // one lock per key
	answers  map[string]answer
	charges  []Charge
	effects  map[string]int // charges applied per key
	requests map[string]int // requests received per key
	gets     int            // GET requests received, whatever the path
	faults   []Fault        // the next requests' faults, in order
	held     chan string    // keys of held requests
	release  chan struct{}  // closed by Release
}

// New returns a Provider. A nil cfg means defaults.
func New(cfg *Config) *Provider {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Decline == nil {
		c.Decline = func(account string) bool { return strings.HasPrefix(account, "decline") }
	}
	if c.Delay == 0 {
		c.Delay = 10 * time.Second
	}
	return &Provider{
		cfg: c, keys: map[string]*sync.Mutex{}, answers: map[string]answer{},
		effects: map[string]int{}, requests: map[string]int{},
		held: make(chan string, 1024), release: make(chan struct{}),
	}
}

// Start serves a new Provider on loopback until t's clean-up and returns
// it with its base URL.
func Start(t testing.TB, cfg *Config) (*Provider, string) {
	t.Helper()
	p := New(cfg)
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		p.Release()
		srv.CloseClientConnections()
		srv.Close()
	})
	return p, srv.URL
}

// Inject queues faults for the next requests, one each, in order; the
// requests after them are answered normally.
func (p *Provider) Inject(faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, faults...)
}

// Held returns a channel that receives the key of every request held by
// Hold or HoldThenDrop, as it is held.
func (p *Provider) Held() <-chan string { return p.held }

// Release lets every held request go on, and every later Hold pass
// through at once. It is safe to call more than once.
func (p *Provider) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.release:
	default:
		close(p.release)
	}
}

// Charges returns the charges applied so far, in order.
func (p *Provider) Charges() []Charge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Charge(nil), p.charges...)
}

// Effects returns how many charges were applied under key.
func (p *Provider) Effects(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.effects[key]
}

// Requests returns how many requests came with key.
func (p *Provider) Requests(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[key]
}

// TotalRequests returns how many POST /charges came, whatever their key.
func (p *Provider) TotalRequests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.requests {
		n += c
	}
	return n
}

// Gets returns how many GET requests came, whatever their path: a client
// that follows a redirect of POST /charges sends one.
func (p *Provider) Gets() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gets
}

func (p *Provider) nextFault() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.faults) == 0 {
		return None
	}
	f := p.faults[0]
	p.faults = p.faults[1:]
	return f
}

func (p *Provider) keyLock(key string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.keys[key]
	if !ok {
		m = new(sync.Mutex)
		p.keys[key] = m
	}
	return m
}

// ServeHTTP implements http.Handler: POST /charges, and GET StatusPath
// (the target of FoundAfterApply).
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		p.mu.Lock()
		p.gets++
		p.mu.Unlock()
		if r.URL.Path == StatusPath {
			reply(w, http.StatusOK, map[string]string{"id": "status-page"})
			return
		}
	}
	if r.Method != http.MethodPost || r.URL.Path != "/charges" {
		reply(w, http.StatusNotFound, map[string]string{"error": "not found"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		reply(w, http.StatusBadRequest, map[string]string{"error": "Idempotency-Key is required"})
		return
	}
	p.mu.Lock()
	p.requests[key]++
	p.mu.Unlock()

	fault := p.nextFault()
	if fault == ServerError {
		reply(w, http.StatusServiceUnavailable, map[string]string{"error": "try again"})
		return
	}
	if fault == Hold || fault == HoldThenDrop {
		p.held <- key
		<-p.release
		if fault == HoldThenDrop {
			panic(http.ErrAbortHandler)
		}
	}

	status, resp := p.apply(key, body)

	switch fault {
	case TimeoutAfterApply:
		t := time.NewTimer(p.cfg.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	case ResetAfterApply:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	case SeeOtherAfterApply:
		http.Redirect(w, r, MovedPath, http.StatusSeeOther)
		return
	case FoundAfterApply:
		http.Redirect(w, r, StatusPath, http.StatusFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(resp)
}

// apply handles one keyed request, one at a time per key: it replays the
// key's answer, or refuses another body under it, or applies the charge
// and records the answer.
func (p *Provider) apply(key string, body []byte) (int, []byte) {
	if !p.cfg.IgnoreKeys {
		l := p.keyLock(key)
		l.Lock()
		defer l.Unlock()
		p.mu.Lock()
		a, seen := p.answers[key]
		p.mu.Unlock()
		if seen {
			if !bytes.Equal(a.body, body) {
				return encode(http.StatusUnprocessableEntity, map[string]string{"error": "Idempotency-Key reused with another request"})
			}
			return a.status, a.resp
		}
	}
	var in request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	status, resp := 0, []byte(nil)
	switch err := dec.Decode(&in); {
	case err != nil:
		status, resp = encode(http.StatusBadRequest, map[string]string{"error": "malformed request: " + err.Error()})
	case in.Account == "" || in.Amount <= 0:
		status, resp = encode(http.StatusBadRequest, map[string]string{"error": "account and a positive amount are required"})
	case p.cfg.Decline(in.Account):
		status, resp = encode(http.StatusPaymentRequired, map[string]string{"error": "card declined"})
	default:
		p.mu.Lock()
		c := Charge{ID: fmt.Sprintf("ch_%d", len(p.charges)+1), Account: in.Account, Amount: in.Amount, Reference: in.Reference, Key: key}
		p.charges = append(p.charges, c)
		p.effects[key]++
		p.mu.Unlock()
		status, resp = encode(http.StatusCreated, c)
	}
	if !p.cfg.IgnoreKeys {
		p.mu.Lock()
		p.answers[key] = answer{body: body, status: status, resp: resp}
		p.mu.Unlock()
	}
	return status, resp
}

func encode(status int, v any) (int, []byte) {
	b, _ := json.Marshal(v)
	return status, append(b, '\n')
}

func reply(w http.ResponseWriter, status int, v any) {
	_, b := encode(status, v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

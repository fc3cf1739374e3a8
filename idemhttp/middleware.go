package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// Middleware protects net/http handlers with idempotency keys. It is safe
// for concurrent use; create one per Guard and configuration and share it.
type Middleware struct {
	guard   *idem.Guard
	cfg     Config
	methods map[string]bool
	// slots holds a token per protected request being served; nil when
	// Config.MaxConcurrent is negative (no bound).
	slots chan struct{}
	// noPrincipal logs, once, how to give requests a principal.
	noPrincipal sync.Once
}

// New returns a Middleware that runs protected requests through guard. A
// nil cfg means defaults; an invalid one is an error naming the field.
func New(guard *idem.Guard, cfg *Config) (*Middleware, error) {
	if guard == nil {
		return nil, errors.New("idemhttp: New: guard is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Middleware{guard: guard, cfg: c, methods: make(map[string]bool)}
	for _, method := range c.Methods {
		m.methods[method] = true
	}
	if c.MaxConcurrent > 0 {
		m.slots = make(chan struct{}, c.MaxConcurrent)
	}
	return m, nil
}

// Handler wraps next with the default route policy: a protected request
// (see Config.Methods) must carry a key and a principal, the store failing
// closes the route, and records live for the Guard's TTL. Its signature is
// that of router middleware, so m.Handler can be given to chi's Use or
// gorilla/mux's Use as it is.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return m.wrap(next, RouteOptions{})
}

// Optional wraps next like Handler, except that a request without a key
// runs next unprotected, with the original ResponseWriter and body.
func (m *Middleware) Optional(next http.Handler) http.Handler {
	return m.wrap(next, RouteOptions{Optional: true})
}

// Route returns middleware that wraps handlers with the policy o. Like
// http.ServeMux.Handle, it panics on a programming error: a negative TTL;
// a Kind without Leased; a leased route without Config.Leased, without a
// Kind, with an invalid Kind, with FailOpen or with Wait; a negative Wait;
// a KeyFrom with both fields, an invalid header name, Config.Header again,
// or a JSON field that is not a JSON Pointer. The middleware it returns
// panics when given a second handler for a Kind already registered.
func (m *Middleware) Route(o RouteOptions) func(http.Handler) http.Handler {
	if o.TTL < 0 {
		panic(fmt.Sprintf("idemhttp: RouteOptions.TTL must not be negative, got %s", o.TTL))
	}
	if o.Wait < 0 {
		panic(fmt.Sprintf("idemhttp: RouteOptions.Wait must not be negative, got %s", o.Wait))
	}
	checkKeySource(m, o)
	if o.Leased {
		checkLeasedRoute(m, o)
	} else if o.Kind != "" {
		panic(fmt.Sprintf("idemhttp: RouteOptions.Kind %q is set but Leased is not", o.Kind))
	}
	return func(next http.Handler) http.Handler { return m.wrap(next, o) }
}

func (m *Middleware) wrap(next http.Handler, o RouteOptions) http.Handler {
	if next == nil {
		panic("idemhttp: nil handler")
	}
	h := &handler{m: m, next: next, opts: o, keyFrom: checkKeySource(m, o)}
	if o.Leased {
		h.kind = KindPrefix + o.Kind
		if err := m.cfg.Leased.Register(h.kind, h.complete); err != nil {
			panic(fmt.Sprintf("idemhttp: leased route of Kind %q: %v (each Kind may be given to one handler only)", o.Kind, err))
		}
	}
	return h
}

type handler struct {
	m    *Middleware
	next http.Handler
	opts RouteOptions
	// kind is the registered kind of a leased route, "" on an atomic one.
	kind string
	// keyFrom is the checked RouteOptions.KeyFrom.
	keyFrom keySource
}

// ServeHTTP takes a protected request through its steps. Each step that
// refuses the request answers it, logs the outcome and returns false.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.m.methods[r.Method] {
		h.next.ServeHTTP(w, r)
		return
	}
	c := &call{m: h.m, h: h, w: w, r: r, start: time.Now(), route: h.m.cfg.Route(r)}
	defer c.leave()
	if !c.takeKey() || !c.admit() || !c.readBody() || !c.takeBodyKey() || !c.resolveScope() {
		return
	}
	c.req.Fingerprint = c.m.fingerprint(r, c.route, c.body)
	if !c.inTime() {
		return
	}
	c.answer(c.execute())
}

// call is one protected request on its way through the middleware.
type call struct {
	// info is what the Guard says of how it answered (see cache_event.go).
	info idem.CallInfo

	m     *Middleware
	h     *handler
	w     http.ResponseWriter
	r     *http.Request
	start time.Time
	route string

	keyHash string
	// keyLater is set when the key is to be found in the body, which has
	// not been read yet.
	keyLater bool
	admitted bool
	body     []byte
	req      idem.Request

	// Set by the work, if the guard ran it.
	workRan bool
	rec     *recorder
}

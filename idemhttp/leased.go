package idemhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/idemkit/idem"
)

// KindPrefix starts the kind under which a leased route's handler is
// registered with Config.Leased: "http:" + RouteOptions.Kind.
const KindPrefix = "http:"

// neverStored are request headers that a leased route never writes into
// the stored request, even when they are fingerprinted: credentials, whose
// place is not a table of records.
var neverStored = []string{"Authorization", "Cookie", "Proxy-Authorization"}

// checkLeasedRoute panics if o cannot make a leased route of m.
func checkLeasedRoute(m *Middleware, o RouteOptions) {
	switch kind := KindPrefix + o.Kind; {
	case m.cfg.Leased == nil:
		panic("idemhttp: RouteOptions.Leased needs Config.Leased, the leased-mode engine")
	case o.Kind == "":
		panic("idemhttp: RouteOptions.Leased needs a Kind, the name under which the completer finds the handler")
	case len(kind) > 255 || !utf8.ValidString(kind) || idem.StoredScope(kind) != kind:
		panic(fmt.Sprintf("idemhttp: RouteOptions.Kind %q must be printable UTF-8, at most %d bytes", o.Kind, 255-len(KindPrefix)))
	case o.FailOpen:
		panic("idemhttp: RouteOptions.FailOpen cannot be combined with Leased: a leased handler's effects are the ones that must not run unprotected")
	case o.Wait != 0:
		panic("idemhttp: RouteOptions.Wait cannot be combined with Leased: a leased request in flight may run for minutes")
	}
}

// storedRequest is what a leased route stores with its claim
// (idem.LeasedRequest.Input), so that a completer can serve the request
// again if its client abandons it. It holds no credentials.
type storedRequest struct {
	Method string `json:"method"`
	Host   string `json:"host,omitempty"`
	// Target is the request target: the escaped path and the raw query.
	Target string `json:"target"`
	// Pattern is the ServeMux pattern that matched, if any, so that the
	// path values can be matched again.
	Pattern string              `json:"pattern,omitempty"`
	Header  map[string][]string `json:"header,omitempty"`
	Body    []byte              `json:"body,omitempty"`
	// Principal is the request's principal (idem.PrincipalFrom), if it had
	// one; Anonymous reports that its key went to idem.AnonymousScope.
	Principal string `json:"principal,omitempty"`
	Anonymous bool   `json:"anonymous,omitempty"`
}

// storedInput encodes the request for the completer.
func (c *call) storedInput() ([]byte, error) {
	in := storedRequest{
		Method:    c.r.Method,
		Host:      c.r.Host,
		Target:    c.r.URL.RequestURI(),
		Pattern:   c.r.Pattern,
		Body:      c.body,
		Anonymous: c.req.Scope == idem.AnonymousScope,
	}
	if p, ok := idem.PrincipalFrom(c.r.Context()); ok {
		in.Principal = p
	}
	for _, name := range append([]string{"Content-Type"}, c.m.cfg.FingerprintHeaders...) {
		if name == c.m.cfg.Header || slices.Contains(neverStored, name) {
			continue
		}
		if v := c.r.Header.Values(name); len(v) > 0 {
			if in.Header == nil {
				in.Header = make(map[string][]string)
			}
			in.Header[name] = slices.Clone(v)
		}
	}
	return json.Marshal(in)
}

// executeLeased runs the request through Config.Leased.
func (c *call) executeLeased() (idem.Result, bool, error) {
	input, err := c.storedInput()
	if err != nil {
		return idem.Result{}, false, err
	}
	return c.m.cfg.Leased.Do(c.r.Context(), idem.LeasedRequest{
		Scope: c.req.Scope, Key: c.req.Key, Fingerprint: c.req.Fingerprint,
		TTL: c.req.TTL, Kind: c.h.kind, Input: input,
	}, c.leasedWork)
}

// leasedWork serves the request under the lease as work does; ctx carries
// the Run.
func (c *call) leasedWork(ctx context.Context, _ *idem.Run) (idem.Result, error) {
	return c.work(ctx)
}

// result decides whether the response in rec is final: it is returned as
// the work's result, or as an error if it must not be recorded.
func (m *Middleware) result(ctx context.Context, rec *recorder) (idem.Result, error) {
	if rec.tooLarge {
		return idem.Result{}, errResponseTooLarge
	}
	status := rec.finalStatus()
	if status >= 500 || (ctx.Err() != nil && (status == http.StatusRequestTimeout || status == statusClientClosed)) {
		// A 5xx is not final. Neither is a 408 or 499 written because
		// the request's context ended: it speaks of this attempt, not of
		// the request, and must not be replayed to the retry.
		return idem.Result{}, &serverError{rec}
	}
	return idem.Result{Status: status, Header: m.recordedHeader(rec.header), Body: rec.body}, nil
}

// complete is the work registered for a leased route: it serves the stored
// request again, for a Completer, and decides about its response as a
// request would. ctx carries the Run.
func (h *handler) complete(ctx context.Context, run *idem.Run) (idem.Result, error) {
	var in storedRequest
	if err := json.Unmarshal(run.Input, &in); err != nil {
		return idem.Result{}, fmt.Errorf("idemhttp: the stored request of kind %q cannot be decoded: %w", h.kind, err)
	}
	if in.Principal != "" {
		ctx = idem.WithPrincipal(ctx, in.Principal)
	}
	r, err := http.NewRequestWithContext(ctx, in.Method, in.Target, bytes.NewReader(in.Body))
	if err != nil {
		return idem.Result{}, fmt.Errorf("idemhttp: the stored request of kind %q cannot be rebuilt: %w", h.kind, err)
	}
	r.RequestURI = in.Target
	r.Host = in.Host
	body := in.Body
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	for name, v := range in.Header {
		r.Header[name] = v
	}
	rec := newRecorder(nil, h.m.cfg.MaxResponseBody)
	if in.Pattern == "" {
		h.next.ServeHTTP(rec, r)
	} else if err := servePattern(h.next, in.Pattern, rec, r); err != nil {
		return idem.Result{}, fmt.Errorf("idemhttp: the stored request of kind %q: %w", h.kind, err)
	}
	return h.m.result(ctx, rec)
}

// servePattern serves r to next through a ServeMux holding pattern alone,
// so that next finds r.Pattern and r.PathValue as it did on the request.
func servePattern(next http.Handler, pattern string, w http.ResponseWriter, r *http.Request) error {
	reached := false
	mux, err := patternMux(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		next.ServeHTTP(w, r)
	}))
	if err != nil {
		return err
	}
	mux.ServeHTTP(w, r)
	if !reached {
		return fmt.Errorf("%s %s does not match its pattern %q", r.Method, r.URL.EscapedPath(), pattern)
	}
	return nil
}

// patternMux returns a ServeMux that serves pattern with h. ServeMux.Handle
// panics on a pattern it cannot parse; the pattern came from a ServeMux, so
// only a damaged record has one, and it is an error.
func patternMux(pattern string, h http.Handler) (mux *http.ServeMux, err error) {
	defer func() {
		if p := recover(); p != nil {
			mux, err = nil, fmt.Errorf("pattern %q: %v", pattern, p)
		}
	}()
	mux = http.NewServeMux()
	mux.Handle(pattern, h)
	return mux, nil
}

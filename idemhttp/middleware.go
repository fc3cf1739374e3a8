package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

// Middleware protects net/http handlers with idempotency keys. It is safe
// for concurrent use; create one per Guard and configuration and share it.
type Middleware struct {
	guard   *idem.Guard
	cfg     Config
	methods map[string]bool
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
	return m, nil
}

// Handler wraps next with the default route policy: a protected request
// (see Config.Methods) must carry a key, the store failing closes the
// route, and records live for the Guard's TTL. Its signature is that of
// router middleware, so m.Handler can be given to chi's Use or gorilla/mux's
// Use as it is.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return m.wrap(next, RouteOptions{})
}

// Optional wraps next like Handler, except that a request without a key
// runs next unprotected, with the original ResponseWriter and body.
func (m *Middleware) Optional(next http.Handler) http.Handler {
	return m.wrap(next, RouteOptions{Optional: true})
}

// Route returns middleware that wraps handlers with the policy o. Like
// http.ServeMux.Handle, it panics on a programming error: a negative TTL.
func (m *Middleware) Route(o RouteOptions) func(http.Handler) http.Handler {
	if o.TTL < 0 {
		panic(fmt.Sprintf("idemhttp: RouteOptions.TTL must not be negative, got %s", o.TTL))
	}
	return func(next http.Handler) http.Handler { return m.wrap(next, o) }
}

func (m *Middleware) wrap(next http.Handler, o RouteOptions) http.Handler {
	if next == nil {
		panic("idemhttp: nil handler")
	}
	return &handler{m: m, next: next, opts: o}
}

type handler struct {
	m    *Middleware
	next http.Handler
	opts RouteOptions
}

// serverError is the work's error when the handler answered 5xx: the
// transaction rolls back and the buffered response is sent unrecorded.
type serverError struct{ rec *recorder }

func (e *serverError) Error() string {
	return fmt.Sprintf("idemhttp: handler answered %d", e.rec.finalStatus())
}

var (
	errRequestTooLarge = errors.New("idemhttp: request body is too large")
	errUnreadableBody  = errors.New("idemhttp: request body could not be read")
)

// call is one protected request on its way through the middleware.
type call struct {
	m       *Middleware
	r       *http.Request
	start   time.Time
	route   string
	keyHash string
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	if !m.methods[r.Method] {
		h.next.ServeHTTP(w, r)
		return
	}
	c := &call{m: m, r: r, start: time.Now(), route: m.cfg.Route(r)}

	key, present, err := parseKeyHeader(r.Header, m.cfg.Header)
	if !present {
		if h.opts.Optional {
			h.next.ServeHTTP(w, r)
			c.done(OutcomeUnprotected, 0, nil)
			return
		}
		writeProblem(w, ProblemMissingKey, http.StatusBadRequest,
			"This request must carry an "+m.cfg.Header+" header.", 0)
		c.done(OutcomeMissingKey, http.StatusBadRequest, nil)
		return
	}
	if err != nil {
		writeProblem(w, ProblemInvalidKey, http.StatusBadRequest, keyErrorDetail(m.cfg.Header, err), 0)
		c.done(OutcomeInvalidKey, http.StatusBadRequest, err)
		return
	}
	c.keyHash = KeyHash(key)

	body, err := readBody(r, m.cfg.MaxRequestBody)
	switch {
	case errors.Is(err, errRequestTooLarge):
		writeProblem(w, ProblemRequestTooLarge, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("The request body must not be larger than %d bytes.", m.cfg.MaxRequestBody), 0)
		c.done(OutcomeTooLarge, http.StatusRequestEntityTooLarge, nil)
		discardRest(w, r)
		return
	case err != nil:
		writeProblem(w, ProblemBadRequest, http.StatusBadRequest, "The request body could not be read.", 0)
		c.done(OutcomeBadRequest, http.StatusBadRequest, err)
		return
	}

	scope, err := m.cfg.Scope(r)
	if err != nil {
		writeProblem(w, ProblemInternal, http.StatusInternalServerError, "", 0)
		c.done(OutcomeError, http.StatusInternalServerError, fmt.Errorf("idemhttp: Config.Scope: %w", err))
		return
	}
	req := idem.Request{
		Scope:       scope,
		Key:         key,
		Fingerprint: m.fingerprint(r, c.route, body),
		TTL:         h.opts.TTL,
	}

	var rec *recorder
	workRan, finished := false, false
	defer func() {
		if !finished {
			// The handler panicked (or called runtime.Goexit). Guard.Do
			// has rolled the transaction back; the panic goes on to
			// net/http's recovery or the user's recoverer.
			c.done(OutcomePanic, 0, nil)
		}
	}()
	res, replayed, err := m.guard.Do(r.Context(), req, func(ctx context.Context) (idem.Result, error) {
		workRan = true
		rec = newRecorder(w, m.cfg.MaxResponseBody)
		h.next.ServeHTTP(rec, withBody(r.WithContext(ctx), body))
		if rec.tooLarge {
			return idem.Result{}, errResponseTooLarge
		}
		status := rec.finalStatus()
		if status >= 500 || (ctx.Err() != nil && (status == http.StatusRequestTimeout || status == statusClientClosed)) {
			// A 5xx is not final. Neither is a 408 or 499 written
			// because the request's context ended: it speaks of this
			// attempt, not of the request, and must not be replayed to
			// the retry.
			return idem.Result{}, &serverError{rec}
		}
		return idem.Result{Status: status, Header: m.recordedHeader(rec.header), Body: rec.body}, nil
	})
	finished = true

	var serr *serverError
	var ife *idem.InFlightError
	switch {
	case err == nil && replayed:
		hdr := w.Header()
		for k, v := range res.Header {
			hdr[k] = slices.Clone(v)
		}
		hdr.Set(ReplayedHeader, "true")
		writeResponse(w, res.Status, res.Body)
		c.done(OutcomeReplayed, res.Status, nil)
	case err == nil:
		// The client of the first execution gets all the handler's
		// headers; a replay gets the recorded subset.
		clear(w.Header())
		maps.Copy(w.Header(), rec.header)
		writeResponse(w, res.Status, res.Body)
		c.done(OutcomeExecuted, res.Status, nil)
	case errors.As(err, &serr):
		clear(w.Header())
		maps.Copy(w.Header(), serr.rec.header)
		status := serr.rec.finalStatus()
		writeResponse(w, status, serr.rec.body)
		c.done(OutcomeRolledBack, status, nil)
	case errors.Is(err, errResponseTooLarge):
		writeProblem(w, ProblemResponseTooLarge, http.StatusInternalServerError, "", 0)
		c.done(OutcomeResponseTooLarge, http.StatusInternalServerError,
			fmt.Errorf("%w: the handler wrote more than Config.MaxResponseBody (%d bytes); its effect was rolled back",
				errResponseTooLarge, m.cfg.MaxResponseBody))
	case errors.As(err, &ife):
		writeProblem(w, ProblemInFlight, http.StatusConflict,
			"Another request with this key is being processed. Retry after it completes.", ife.RetryAfter)
		c.done(OutcomeInFlight, http.StatusConflict, nil)
	case errors.Is(err, idem.ErrMismatch):
		writeProblem(w, ProblemMismatch, http.StatusUnprocessableEntity,
			"This key was already used with a different request. Use a new key for a new request.", 0)
		c.done(OutcomeMismatch, http.StatusUnprocessableEntity, nil)
	case errors.Is(err, idem.ErrInvalidKey):
		writeProblem(w, ProblemInvalidKey, http.StatusBadRequest, keyErrorDetail(m.cfg.Header, err), 0)
		c.done(OutcomeInvalidKey, http.StatusBadRequest, err)
	case errors.Is(err, idem.ErrUnavailable) && !workRan && h.opts.FailOpen:
		h.next.ServeHTTP(w, withBody(r, body))
		c.done(OutcomeFailOpen, 0, err)
	case errors.Is(err, idem.ErrUnavailable) && errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled):
		// The store failed because the client left (a deadline that ran
		// out is the server's own limit, and stays "unavailable"); the
		// answer is for the log and metrics, as nobody reads it.
		writeProblem(w, ProblemUnavailable, http.StatusServiceUnavailable,
			"The request was not processed. Retry later with the same key.", m.cfg.UnavailableRetryAfter)
		c.done(OutcomeCanceled, http.StatusServiceUnavailable, err)
	case errors.Is(err, idem.ErrUnavailable):
		writeProblem(w, ProblemUnavailable, http.StatusServiceUnavailable,
			"The request was not processed. Retry later with the same key.", m.cfg.UnavailableRetryAfter)
		c.done(OutcomeUnavailable, http.StatusServiceUnavailable, err)
	default:
		writeProblem(w, ProblemInternal, http.StatusInternalServerError, "", 0)
		c.done(OutcomeError, http.StatusInternalServerError, err)
	}
}

// statusClientClosed is the non-standard 499 that some handlers write when
// the client has gone away.
const statusClientClosed = 499

// done logs the outcome and tells the observer.
func (c *call) done(o Outcome, status int, err error) {
	d := time.Since(c.start)
	ctx := c.r.Context()
	logger := c.m.cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if level := outcomeLevel(o); logger.Enabled(ctx, level) {
		attrs := []slog.Attr{
			slog.String("outcome", string(o)),
			slog.String("method", c.r.Method),
			slog.String("route", c.route),
		}
		if c.keyHash != "" {
			attrs = append(attrs, slog.String("key_sha256", c.keyHash))
		}
		if status != 0 {
			attrs = append(attrs, slog.Int("status", status))
		}
		attrs = append(attrs, slog.Duration("duration", d))
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		logger.LogAttrs(ctx, level, "idemhttp: "+string(o), attrs...)
	}
	if c.m.cfg.Observer != nil {
		c.m.cfg.Observer.Observe(ctx, Event{Outcome: o, Method: c.r.Method, Route: c.route, Status: status, Duration: d})
	}
}

// parseKeyHeader returns the key the named header carries, and whether the
// header is present at all.
func parseKeyHeader(h http.Header, name string) (key string, present bool, err error) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		key, err := idem.ParseKey(vs[0])
		return key, true, err
	default:
		return "", true, fmt.Errorf("%w: the header appears %d times", idem.ErrInvalidKey, len(vs))
	}
}

// keyErrorDetail turns a key error into a problem detail for the client.
// Key errors never quote the key.
func keyErrorDetail(header string, err error) string {
	reason := strings.TrimPrefix(err.Error(), idem.ErrInvalidKey.Error()+": ")
	return header + " must be one string of 1 to 255 visible ASCII characters, as an sf-string (\"abc\") or a bare token (abc): " + reason + "."
}

// readBody reads the whole request body, refusing one over limit without
// reading more than limit+1 bytes (or any, if Content-Length says so).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errRequestTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, errRequestTooLarge
		}
		return nil, fmt.Errorf("%w: %w", errUnreadableBody, err)
	}
	if int64(len(b)) > limit {
		return nil, errRequestTooLarge
	}
	return b, nil
}

// Bounds of discardRest.
const (
	discardMaxBytes = 64 << 20
	discardMaxTime  = 5 * time.Second
)

// discardRest reads and drops what is left of a refused request's body, up
// to discardMaxBytes or discardMaxTime, after the answer has been sent. A
// client that writes its whole body before reading (many do) then reads the
// 413 instead of a connection reset, which it would see if the server closed
// the connection with unread data in flight.
func discardRest(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(discardMaxTime))
	_, _ = io.CopyN(io.Discard, r.Body, discardMaxBytes)
}

// withBody returns r with its body replaced by the buffered one.
func withBody(r *http.Request, body []byte) *http.Request {
	r2 := *r
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r2.ContentLength = int64(len(body))
	return &r2
}

// recordedHeader returns the configured subset of h.
func (m *Middleware) recordedHeader(h http.Header) map[string][]string {
	var out map[string][]string
	for _, name := range m.cfg.RecordHeaders {
		if v := h[name]; len(v) > 0 {
			if out == nil {
				out = make(map[string][]string)
			}
			out[name] = slices.Clone(v)
		}
	}
	return out
}

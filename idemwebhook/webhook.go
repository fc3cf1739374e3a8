package idemwebhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// Headers that the receiver sets on the request its handler receives,
// replacing any the delivery carried.
const (
	// DeliveryHeader holds the verified delivery id (see DeliveryID).
	DeliveryHeader = "Idem-Webhook-Delivery"
	// KeyHeader holds it as the idempotency key idemhttp reads.
	KeyHeader = "Idem-Webhook-Key"
)

// ProblemBase prefixes the type URIs of the receiver's own answers: a
// rejection's reason with "-" for "_" ("…/webhook/bad-signature"), or
// "conflict".
const ProblemBase = "https://idemkit.dev/problems/webhook/"

// DeliveryID returns the verified delivery id of a request that a receiver
// passed to its handler (also when a completer serves a leased delivery
// again).
func DeliveryID(r *http.Request) string { return r.Header.Get(DeliveryHeader) }

// New returns middleware that receives webhooks exactly once. For each
// delivery, in this order: the body is read, up to Config.MaxBody (413
// beyond); its signature is checked by v, and its timestamp against
// Config.Tolerance (401 with the reason, before anything is recorded or
// run); its delivery id is taken; then the handler runs through guard
// with the scope "webhook/<provider>/<endpoint>" and the delivery id as
// the key, in the store's transaction (or, with Config.Leased, under a
// lease), by package idemhttp. A delivery already processed gets its
// recorded answer again; the same delivery id with another payload gets
// 409 and never runs; a handler's 5xx or a store failure is rolled back
// and answered 503, for the provider to retry; a delivery being processed
// gets 409 with Retry-After.
//
// Like http.ServeMux.Handle, New panics on a programming error: a nil
// guard or verifier, an invalid Config. With Config.Leased, the middleware
// it returns may wrap one handler only.
func New(guard *idem.Guard, v Verifier, cfg *Config) func(http.Handler) http.Handler {
	if guard == nil || v == nil {
		panic("idemwebhook: New needs a guard and a verifier")
	}
	c, err := cfg.withDefaults(v)
	if err != nil {
		panic(err.Error())
	}
	rc := &receiver{v: v, cfg: c, scope: Scope(c.Provider, c.Endpoint)}
	scope := rc.scope
	mw, err := idemhttp.New(guard, &idemhttp.Config{
		Methods:               []string{http.MethodPost},
		Header:                KeyHeader,
		Scope:                 func(*http.Request) (string, error) { return scope, nil },
		Route:                 func(*http.Request) string { return scope },
		FingerprintHeaders:    []string{DeliveryHeader},
		MaxRequestBody:        c.MaxBody,
		UnavailableRetryAfter: c.UnavailableRetryAfter,
		Logger:                c.Logger,
		Observer:              idem.ObserverFunc(observeInner),
		Leased:                c.Leased,
	})
	if err != nil {
		panic(err.Error())
	}
	route := mw.Route(idemhttp.RouteOptions{
		TTL: c.TTL, Leased: c.Leased != nil, Kind: c.Kind,
		OnMismatch: http.HandlerFunc(conflict),
	})
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("idemwebhook: nil handler")
		}
		return &handler{rc: rc, inner: route(retryable(next))}
	}
}

type receiver struct {
	v     Verifier
	cfg   Config
	scope string
}

type handler struct {
	rc    *receiver
	inner http.Handler
}

// delivery is one delivery on its way; idemhttp's outcome reaches it
// through the request's context (observeInner).
type delivery struct {
	start   time.Time
	idHash  string
	outcome idem.Outcome
	status  int
}

type deliveryKey struct{}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := h.rc
	d := &delivery{start: time.Now()}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		rc.reject(w, r, d, &RejectError{Reason: ReasonMethod, Detail: "webhooks are delivered with POST"}, false)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, rc.cfg.MaxBody+1))
	switch {
	case err != nil:
		rc.reject(w, r, d, &RejectError{Reason: ReasonUnreadable, Detail: "the body could not be read"}, false)
		return
	case int64(len(body)) > rc.cfg.MaxBody:
		w.Header().Set("Connection", "close")
		rc.reject(w, r, d, &RejectError{Reason: ReasonTooLarge,
			Detail: fmt.Sprintf("the body must not be larger than %d bytes", rc.cfg.MaxBody)}, false)
		return
	}
	got, err := rc.v.Verify(r.Header, body)
	if err != nil {
		re := reasonOf(err)
		rc.reject(w, r, d, re, re.Reason == ReasonMissingID || re.Reason == ReasonInvalidID)
		return
	}
	if re := rc.checkTime(got.Timestamp); re != nil {
		rc.reject(w, r, d, re, false)
		return
	}
	switch {
	case got.ID == "":
		rc.reject(w, r, d, &RejectError{Reason: ReasonMissingID, Detail: "the delivery carries no delivery id"}, true)
		return
	case idem.ValidateKey(got.ID) != nil:
		rc.reject(w, r, d, &RejectError{Reason: ReasonInvalidID, Detail: "a delivery id is 1 to 255 visible ASCII characters"}, true)
		return
	}
	d.idHash = idem.KeyHash(got.ID)
	r2 := r.Clone(context.WithValue(r.Context(), deliveryKey{}, d))
	r2.Header.Set(KeyHeader, idem.QuoteKey(got.ID))
	r2.Header.Set(DeliveryHeader, got.ID)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	h.inner.ServeHTTP(w, r2)
	rc.finish(r, d)
}

// checkTime refuses a timestamp beyond the tolerance, either way.
func (rc *receiver) checkTime(ts time.Time) *RejectError {
	if ts.IsZero() {
		return nil
	}
	now := rc.cfg.Now()
	switch tol := rc.cfg.Tolerance; {
	case now.Sub(ts) > tol:
		return &RejectError{Reason: ReasonStaleTimestamp, Detail: fmt.Sprintf(
			"signed %s ago, longer than the tolerance of %s: a replay, or a delivery retried with an old signature", now.Sub(ts).Round(time.Second), tol)}
	case ts.Sub(now) > tol:
		return &RejectError{Reason: ReasonFutureTimestamp, Detail: fmt.Sprintf(
			"signed %s ahead of this server's clock, more than the tolerance of %s: check both clocks", ts.Sub(now).Round(time.Second), tol)}
	}
	return nil
}

// reject answers a refused delivery; nothing was recorded or run.
func (rc *receiver) reject(w http.ResponseWriter, r *http.Request, d *delivery, re *RejectError, verified bool) {
	status := re.Reason.status()
	writeProblem(w, ProblemBase+strings.ReplaceAll(string(re.Reason), "_", "-"), status, "The webhook delivery was refused", re.Detail)
	rc.emit(r, d, Event{Outcome: OutcomeRejected, Verified: verified, Reason: re.Reason, Status: status}, re.Detail)
}

// finish tells of a verified delivery that idemhttp answered.
func (rc *receiver) finish(r *http.Request, d *delivery) {
	e := Event{Outcome: outcomeOf(d.outcome), Verified: true, Status: d.status}
	detail := ""
	if e.Outcome == OutcomeConflicted {
		detail = "this delivery id was processed before with another payload; it was not run (a provider bug, or a forged delivery signed with a leaked secret)"
	}
	rc.emit(r, d, e, detail)
}

func (rc *receiver) emit(r *http.Request, d *delivery, e Event, detail string) {
	e.Provider, e.Endpoint, e.IDHash = rc.cfg.Provider, rc.cfg.Endpoint, d.idHash
	e.Duration = time.Since(d.start)
	ctx := r.Context()
	level := slog.LevelDebug
	if e.Outcome == OutcomeRejected || e.Outcome == OutcomeConflicted {
		level = slog.LevelWarn
	}
	logger := rc.cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if logger.Enabled(ctx, level) {
		attrs := []slog.Attr{slog.String("outcome", string(e.Outcome)), slog.String("provider", e.Provider),
			slog.String("endpoint", e.Endpoint), slog.Int("status", e.Status)}
		if e.Reason != "" {
			attrs = append(attrs, slog.String("reason", string(e.Reason)))
		}
		if e.IDHash != "" {
			attrs = append(attrs, slog.String("delivery_sha256", e.IDHash))
		}
		if detail != "" {
			attrs = append(attrs, slog.String("detail", detail))
		}
		logger.LogAttrs(ctx, level, "idemwebhook: "+string(e.Outcome), attrs...)
	}
	if rc.cfg.Observer != nil {
		rc.cfg.Observer.ObserveWebhook(ctx, e)
	}
}

// observeInner keeps idemhttp's outcome of a delivery for finish.
func observeInner(ctx context.Context, e idem.Event) {
	if d, ok := ctx.Value(deliveryKey{}).(*delivery); ok {
		d.outcome, d.status = e.Outcome, e.Status
	}
}

func outcomeOf(o idem.Outcome) Outcome {
	switch o {
	case idem.OutcomeExecuted:
		return OutcomeExecuted
	case idem.OutcomeReplayed:
		return OutcomeReplayed
	case idem.OutcomeMismatch:
		return OutcomeConflicted
	case idem.OutcomeInFlight:
		return OutcomeInFlight
	case idem.OutcomeRolledBack, idem.OutcomeReleased:
		return OutcomeRolledBack
	case idem.OutcomeUnavailable, idem.OutcomeCanceled, idem.OutcomeLeaseLost, idem.OutcomeTooBusy, idem.OutcomeRequestTimeout:
		return OutcomeUnavailable
	default:
		return OutcomeError
	}
}

// conflict answers a delivery id recorded with another payload.
func conflict(w http.ResponseWriter, _ *http.Request) {
	writeProblem(w, ProblemBase+"conflict", http.StatusConflict, "The delivery id was used with a different payload",
		"This delivery id was processed before with another payload, so this one was not processed. A provider resends a delivery byte for byte; a different payload under the same id is a provider bug or a forged delivery.")
}

// retryable turns a handler's 5xx into 503 with Retry-After, which every
// provider retries; idemhttp has rolled its effect back.
func retryable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&retryWriter{ResponseWriter: w}, r)
	})
}

type retryWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *retryWriter) WriteHeader(code int) {
	if !w.wrote && code >= 500 {
		code = http.StatusServiceUnavailable
		if w.Header().Get("Retry-After") == "" {
			w.Header().Set("Retry-After", "1")
		}
	}
	if code >= 200 {
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *retryWriter) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

// writeProblem sends an RFC 9457 problem.
func writeProblem(w http.ResponseWriter, typ string, status int, title, detail string) {
	body, _ := json.Marshal(idemhttp.Problem{Type: typ, Title: title, Status: status, Detail: detail})
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", idemhttp.ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

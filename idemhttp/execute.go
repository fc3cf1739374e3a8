package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/idemkit/idem"
)

// serverError is the work's error when the handler answered 5xx: the
// transaction rolls back and the buffered response is sent unrecorded.
type serverError struct{ rec *recorder }

func (e *serverError) Error() string {
	return fmt.Sprintf("idemhttp: handler answered %d", e.rec.finalStatus())
}

// statusClientClosed is the non-standard 499 that some handlers write when
// the client has gone away.
const statusClientClosed = 499

// execute runs the request through the guard: a replay, a refusal, or the
// handler inside the store's transaction.
func (c *call) execute() (res idem.Result, replayed bool, err error) {
	finished := false
	defer func() {
		if !finished {
			// The handler panicked (or called runtime.Goexit). Guard.Do
			// has rolled the transaction back; the panic goes on to
			// net/http's recovery or the user's recoverer.
			c.done(idem.OutcomePanic, 0, nil)
		}
	}()
	if c.h.kind != "" {
		res, replayed, err = c.executeLeased()
	} else {
		res, replayed, err = c.m.guard.Do(idem.WithCallInfo(c.r.Context(), &c.info), c.req, c.work)
	}
	finished = true
	return res, replayed, err
}

// work runs the handler in the transaction that ctx carries, with a
// recorder for its response, and decides whether the response is final.
func (c *call) work(ctx context.Context) (idem.Result, error) {
	c.workRan = true
	c.rec = newRecorder(c.w, c.m.cfg.MaxResponseBody)
	c.h.next.ServeHTTP(c.rec, withBody(c.r.WithContext(ctx), c.body))
	return c.m.result(ctx, c.rec)
}

// answer sends what the guard decided.
func (c *call) answer(res idem.Result, replayed bool, err error) {
	switch {
	case err == nil && replayed:
		hdr := c.w.Header()
		for k, v := range res.Header {
			hdr[k] = slices.Clone(v)
		}
		hdr.Set(ReplayedHeader, "true")
		writeResponse(c.w, res.Status, res.Body)
		c.done(idem.OutcomeReplayed, res.Status, nil)
	case err == nil:
		// The client of the first execution gets all the handler's
		// headers; a replay gets the recorded subset. The recorded ones
		// go out as they were recorded (the store keeps header values as
		// text: see idem.Result.Header), so the first answer and its
		// replays carry the same bytes.
		maps.Copy(c.rec.header, res.Header)
		c.sendRecorded(c.rec)
		c.done(idem.OutcomeExecuted, res.Status, nil)
	default:
		c.answerError(err)
	}
}

// answerError answers a request that the guard did not complete.
func (c *call) answerError(err error) {
	w, cfg := c.w, &c.m.cfg
	var serr *serverError
	var ife *idem.InFlightError
	switch {
	case errors.Is(err, idem.ErrFenced):
		// Only a leased route's work can lose its lease. What it did
		// through its Run was refused; its successor owns the request.
		writeProblem(w, ProblemLeaseLost, http.StatusServiceUnavailable,
			"The server lost its claim on this request while processing it; another attempt now holds it. Retry later with the same key.",
			c.m.cfg.Leased.Lease())
		c.done(idem.OutcomeLeaseLost, http.StatusServiceUnavailable, err)
	case errors.As(err, &serr):
		c.sendRecorded(serr.rec)
		if c.h.kind != "" {
			c.done(idem.OutcomeReleased, serr.rec.finalStatus(), nil)
		} else {
			c.done(idem.OutcomeRolledBack, serr.rec.finalStatus(), nil)
		}
	case errors.Is(err, errResponseTooLarge):
		writeProblem(w, ProblemResponseTooLarge, http.StatusInternalServerError, "", 0)
		c.done(idem.OutcomeResponseTooLarge, http.StatusInternalServerError,
			fmt.Errorf("%w: the handler wrote more than Config.MaxResponseBody (%d bytes); its effect was rolled back",
				errResponseTooLarge, cfg.MaxResponseBody))
	case errors.As(err, &ife):
		writeProblem(w, ProblemInFlight, http.StatusConflict,
			"Another request with this key is being processed. Retry after it completes.", ife.RetryAfter)
		c.done(idem.OutcomeInFlight, http.StatusConflict, nil)
	case errors.Is(err, idem.ErrMismatch) && c.h.opts.OnMismatch != nil:
		sw := &statusWriter{ResponseWriter: w}
		c.h.opts.OnMismatch.ServeHTTP(sw, c.r)
		c.done(idem.OutcomeMismatch, sw.status(), nil)
	case errors.Is(err, idem.ErrMismatch):
		writeProblem(w, ProblemMismatch, http.StatusUnprocessableEntity,
			"This key was already used with a different request. Use a new key for a new request.", 0)
		c.done(idem.OutcomeMismatch, http.StatusUnprocessableEntity, nil)
	case errors.Is(err, idem.ErrInvalidKey):
		writeProblem(w, ProblemInvalidKey, http.StatusBadRequest, keyErrorDetail(cfg.Header, err), 0)
		c.done(idem.OutcomeInvalidKey, http.StatusBadRequest, err)
	case errors.Is(err, idem.ErrUnavailable):
		c.answerUnavailable(err)
	default:
		writeProblem(w, ProblemInternal, http.StatusInternalServerError, "", 0)
		c.done(idem.OutcomeError, http.StatusInternalServerError, err)
	}
}

// answerUnavailable answers a store failure: fail closed with 503, or run
// the handler unprotected on a FailOpen route if it has not run yet.
func (c *call) answerUnavailable(err error) {
	if !c.workRan && c.h.opts.FailOpen {
		c.h.next.ServeHTTP(c.w, withBody(c.r, c.body))
		c.done(idem.OutcomeFailOpen, 0, err)
		return
	}
	writeProblem(c.w, ProblemUnavailable, http.StatusServiceUnavailable,
		"The request was not processed. Retry later with the same key.", c.m.cfg.UnavailableRetryAfter)
	if errors.Is(err, context.Canceled) && errors.Is(c.r.Context().Err(), context.Canceled) {
		// The store failed because the client left (a deadline that ran
		// out is the server's own limit, and stays "unavailable"); the
		// answer is for the log and metrics, as nobody reads it.
		c.done(idem.OutcomeCanceled, http.StatusServiceUnavailable, err)
		return
	}
	c.done(idem.OutcomeUnavailable, http.StatusServiceUnavailable, err)
}

// sendRecorded sends the handler's buffered response with all its headers.
func (c *call) sendRecorded(rec *recorder) {
	clear(c.w.Header())
	maps.Copy(c.w.Header(), rec.header)
	writeResponse(c.w, rec.finalStatus(), rec.body)
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

// statusWriter remembers the status written through it, for the outcome
// of an answer that RouteOptions.OnMismatch wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

package idemhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/idemkit/idem"
)

// The steps a protected request takes before the store is asked, in order.
// Each answers the request itself when it refuses it, and returns false.

// takeKey parses the key header, and RouteOptions.KeyFrom's header. A
// request without a key is refused with 400, or on an Optional route runs
// the handler unprotected, unless its key may be in the body, which
// takeBodyKey reads once the body has been read.
func (c *call) takeKey() bool {
	name := c.m.cfg.Header
	key, present, err := parseKeyHeader(c.r.Header, name)
	if err != nil {
		c.refuseKey(keyErrorDetail(name, err), err)
		return false
	}
	if src := c.h.keyFrom.header; src != "" {
		k, p, err := parseKeyHeader(c.r.Header, src)
		switch {
		case err != nil:
			c.refuseKey(keyErrorDetail(src, err), err)
			return false
		case p && present && k != key:
			c.refuseConflict(src)
			return false
		case p:
			key, present, name = k, true, src
		}
	}
	switch {
	case !present && c.h.keyFrom.pointer != nil:
		c.keyLater = true
		return true
	case !present:
		c.noKey(c.r)
		return false
	}
	c.setKey(key)
	return true
}

// takeBodyKey finds the key in the body when RouteOptions.KeyFrom.JSON is
// set, and checks it against the header's when both are there.
func (c *call) takeBodyKey() bool {
	src := c.h.keyFrom
	if src.pointer == nil {
		return true
	}
	key, present, err := bodyKey(c.body, src.pointer)
	switch {
	case err != nil:
		c.refuseKey(bodyKeyErrorDetail(src.json, err), err)
		return false
	case present && !c.keyLater && key != c.req.Key:
		c.refuseConflict("the body member " + src.json)
		return false
	case present && c.keyLater:
		c.setKey(key)
	case c.keyLater:
		c.noKey(withBody(c.r, c.body))
		return false
	}
	return true
}

func (c *call) setKey(key string) {
	c.req.Key = key
	c.req.TTL = c.h.opts.TTL
	c.req.Wait = c.h.opts.Wait
	c.keyHash = idem.KeyHash(key)
}

// noKey answers a request without a key: r runs the handler unprotected on
// an Optional route, and is refused with 400 missing-key on the others.
func (c *call) noKey(r *http.Request) {
	if c.h.opts.Optional {
		c.h.next.ServeHTTP(c.w, r)
		c.done(idem.OutcomeUnprotected, 0, nil)
		return
	}
	detail := "This request must carry an " + c.m.cfg.Header + " header."
	switch src := c.h.keyFrom; {
	case src.header != "":
		detail = "This request must carry an " + c.m.cfg.Header + " or a " + src.header + " header."
	case src.pointer != nil:
		detail = "This request must carry an " + c.m.cfg.Header + " header, or its key in the JSON body's member " + src.json + "."
	}
	writeProblem(c.w, ProblemMissingKey, http.StatusBadRequest, detail, 0)
	c.done(idem.OutcomeMissingKey, http.StatusBadRequest, nil)
}

func (c *call) refuseKey(detail string, err error) {
	writeProblem(c.w, ProblemInvalidKey, http.StatusBadRequest, detail, 0)
	c.done(idem.OutcomeInvalidKey, http.StatusBadRequest, err)
}

// refuseConflict refuses a request whose key in Config.Header differs
// from the one in other.
func (c *call) refuseConflict(other string) {
	writeProblem(c.w, ProblemConflictingKeys, http.StatusBadRequest,
		"The "+c.m.cfg.Header+" header and "+other+" carry different keys; send one key, or the same in both. Nothing was done.", 0)
	c.done(idem.OutcomeInvalidKey, http.StatusBadRequest, errConflictingKeys)
}

var errConflictingKeys = fmt.Errorf("%w: two different keys", idem.ErrInvalidKey)

// admit takes one of the Config.MaxConcurrent slots, or refuses the
// request with 503 too-busy before its body is read.
func (c *call) admit() bool {
	if c.m.slots == nil {
		return true
	}
	select {
	case c.m.slots <- struct{}{}:
		c.admitted = true
		return true
	default:
		writeProblem(c.w, ProblemTooBusy, http.StatusServiceUnavailable,
			"The server is serving too many requests at once. Nothing was done; retry later with the same key.", busyRetryAfter)
		c.done(idem.OutcomeTooBusy, http.StatusServiceUnavailable, nil)
		return false
	}
}

// leave gives back the request's slot, if it took one.
func (c *call) leave() {
	if c.admitted {
		<-c.m.slots
	}
}

// readBody reads the whole body, for the fingerprint and the handler. A
// body over the limit is a 413; one that did not arrive in time, or whose
// client left while sending it, a 408.
func (c *call) readBody() bool {
	stop := interruptAtEnd(c.w, c.r)
	body, err := readBody(c.r, c.m.cfg.MaxRequestBody)
	stop()
	if err == nil {
		c.body = body
		return true
	}
	if errors.Is(err, errRequestTooLarge) {
		writeProblem(c.w, ProblemRequestTooLarge, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("The request body must not be larger than %d bytes.", c.m.cfg.MaxRequestBody), 0)
		c.done(idem.OutcomeTooLarge, http.StatusRequestEntityTooLarge, nil)
		discardRest(c.w, c.r)
		return false
	}
	if o, ended := endedOutcome(c.r, err); ended {
		c.refuseEnded(o, err)
		return false
	}
	writeProblem(c.w, ProblemBadRequest, http.StatusBadRequest, "The request body could not be read.", 0)
	c.done(idem.OutcomeBadRequest, http.StatusBadRequest, err)
	return false
}

// resolveScope asks Config.Scope for the key's scope, with the body
// readable. A request without a principal gets idem.AnonymousScope where the
// route allows it, and is refused with 500 no-principal elsewhere.
func (c *call) resolveScope() bool {
	scope, err := c.m.cfg.Scope(withBody(c.r, c.body))
	if err == nil && scope == "" {
		err = fmt.Errorf("%w: Config.Scope returned an empty scope", idem.ErrNoPrincipal)
	}
	switch {
	case err == nil:
		c.req.Scope = scope
		return true
	case errors.Is(err, idem.ErrNoPrincipal) && (c.m.cfg.Anonymous || c.h.opts.Anonymous):
		c.req.Scope = idem.AnonymousScope
		return true
	case errors.Is(err, idem.ErrNoPrincipal):
		c.m.noPrincipal.Do(func() {
			c.m.logger().LogAttrs(c.r.Context(), slog.LevelError,
				"idemhttp: protected requests without a principal are refused with 500 no-principal, "+
					"because their keys cannot be kept apart from other callers' keys. "+
					"Call idem.WithPrincipal(ctx, id) in the authentication middleware that runs before this one, "+
					"or set Config.Scope to a function that returns the caller's identity, "+
					"or, on a public endpoint whose callers use random keys, set Config.Anonymous or RouteOptions.Anonymous",
				slog.String("method", c.r.Method), slog.String("route", c.route))
		})
		writeProblem(c.w, ProblemNoPrincipal, http.StatusInternalServerError,
			"The server could not tell who sent this request, so it cannot keep its key apart from other callers' keys. Nothing was done.", 0)
		c.done(idem.OutcomeNoPrincipal, http.StatusInternalServerError, err)
		return false
	default:
		writeProblem(c.w, ProblemInternal, http.StatusInternalServerError, "", 0)
		c.done(idem.OutcomeError, http.StatusInternalServerError, fmt.Errorf("idemhttp: Config.Scope: %w", err))
		return false
	}
}

// inTime refuses, with 408, a request whose context ended before the store
// was asked: its deadline ran out while it was being received (a slow
// upload) or its client left. Asking the store would only fail.
func (c *call) inTime() bool {
	o, ended := endedOutcome(c.r, nil)
	if ended {
		c.refuseEnded(o, context.Cause(c.r.Context()))
	}
	return !ended
}

// refuseEnded answers 408 to a request that ended before any work. Nothing
// was recorded; the connection is closed, since its state is unknown.
func (c *call) refuseEnded(o idem.Outcome, err error) {
	c.w.Header().Set("Connection", "close")
	writeProblem(c.w, ProblemRequestTimeout, http.StatusRequestTimeout,
		"The request was not received in time. Nothing was done; retry with the same key.", 0)
	c.done(o, http.StatusRequestTimeout, err)
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

// bodyKeyErrorDetail is keyErrorDetail for a key in the body.
func bodyKeyErrorDetail(pointer string, err error) string {
	reason := strings.TrimPrefix(err.Error(), idem.ErrInvalidKey.Error()+": ")
	return "The JSON body's member " + pointer + " must be a string (or a number) of 1 to 255 visible ASCII characters: " + reason + "."
}

// keyErrorDetail turns a key error into a problem detail for the client.
// Key errors never quote the key.
func keyErrorDetail(header string, err error) string {
	reason := strings.TrimPrefix(err.Error(), idem.ErrInvalidKey.Error()+": ")
	return header + " must be one string of 1 to 255 visible ASCII characters, as an sf-string (\"abc\") or a bare token (abc): " + reason + "."
}

// Package idemgin runs idem's net/http middleware (package idemhttp) on gin
// routes. It is a thin adapter: every decision (keys, scope, fingerprint,
// recording, replay, refusals) is idemhttp's; this package only hands gin's
// request and writer across. It is its own Go module, so that programs
// that do not import it never build gin.
//
//	mw, _ := idemhttp.New(guard, nil)
//	r := gin.New()
//	r.Use(authenticate) // calls idemgin.SetPrincipal(c, "user:42")
//	r.POST("/transfers", idemgin.Middleware(mw), createTransfer)
//
// A handler after the middleware runs inside the store's transaction:
// reach it with sqlitestore.TxFrom(c.Request.Context()) (or pgstore's,
// memstore's). Its 2xx, 3xx and 4xx answers are recorded with its effect;
// a 5xx rolls the effect back. When idemhttp answers itself (a replay, a
// missing key, a concurrent duplicate, a reused key, a store failure) the
// rest of the chain is aborted. See docs/ECOSYSTEM.md.
package idemgin

import (
	"bufio"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
)

// Middleware returns mw.Handler as gin middleware: a key is required on
// the protected methods (see idemhttp.Config.Methods).
func Middleware(mw *idemhttp.Middleware) gin.HandlerFunc { return Wrap(mw.Handler) }

// Route returns mw.Route(o) as gin middleware, for a route with its own
// policy (an optional key, anonymous callers, a TTL).
func Route(mw *idemhttp.Middleware, o idemhttp.RouteOptions) gin.HandlerFunc {
	return Wrap(mw.Route(o))
}

// Wrap turns net/http middleware into gin middleware: the rest of gin's
// chain runs as the wrapped handler, with the request and writer the
// middleware gives it; if the middleware answers without calling it, the
// chain is aborted.
func Wrap(middleware func(http.Handler) http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		ran := false
		outerW, outerR := c.Writer, c.Request
		middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran = true
			inner := &writer{ResponseWriter: w, status: http.StatusOK}
			c.Writer, c.Request = inner, r
			c.Next()
			inner.WriteHeaderNow()
		})).ServeHTTP(outerW, outerR)
		c.Writer, c.Request = outerW, outerR
		if !ran {
			c.Abort()
		}
	}
}

// SetPrincipal hands the principal that authentication established to
// idemhttp (idem.WithPrincipal on the request's context). Call it in
// the authentication middleware, before Middleware.
func SetPrincipal(c *gin.Context, principal string) {
	c.Request = c.Request.WithContext(idem.WithPrincipal(c.Request.Context(), principal))
}

// writer is a gin.ResponseWriter over the writer idemhttp gives the
// handler (which buffers the response until it is recorded). Like gin's
// own, it delays the status line until the first write, so that headers
// set after c.Status still count.
type writer struct {
	http.ResponseWriter
	status  int
	size    int
	written bool
}

var _ gin.ResponseWriter = (*writer)(nil)

func (w *writer) WriteHeader(code int) {
	if code > 0 && !w.written {
		w.status = code
	}
}

func (w *writer) WriteHeaderNow() {
	if !w.written {
		w.written = true
		w.ResponseWriter.WriteHeader(w.status)
	}
}

func (w *writer) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

func (w *writer) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

func (w *writer) Status() int { return w.status }

func (w *writer) Size() int {
	if !w.written {
		return -1
	}
	return w.size
}

func (w *writer) Written() bool { return w.written }

// Hijack is refused: a protected response is recorded before it is sent.
func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, http.ErrNotSupported
}

// Flush does nothing: a protected response is recorded before it is sent.
func (w *writer) Flush() {}

// CloseNotify returns a channel that never fires; use the request's
// context instead.
func (w *writer) CloseNotify() <-chan bool { return make(chan bool) }

// Pusher returns nil: no server push from a protected handler.
func (w *writer) Pusher() http.Pusher { return nil }

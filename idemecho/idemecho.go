// Package idemecho runs idem's net/http middleware (package idemhttp) on
// echo routes. It is a thin adapter: every decision (keys, scope,
// fingerprint, recording, replay, refusals) is idemhttp's; this package
// only hands echo's request and response across. It is its own Go module,
// so that programs that do not import it never build echo.
//
//	mw, _ := idemhttp.New(guard, nil)
//	e := echo.New()
//	e.Use(authenticate) // calls idemecho.SetPrincipal(c, "user:42")
//	e.POST("/transfers", createTransfer, idemecho.Middleware(mw))
//
// The handler runs inside the store's transaction: reach it with
// sqlitestore.TxFrom(c.Request().Context()) (or pgstore's, memstore's).
// Its 2xx, 3xx and 4xx answers are recorded with its effect; a 5xx rolls
// the effect back. An error the handler returns is rendered by the echo
// instance's HTTPErrorHandler inside the middleware, so that it is part of
// the answer idemhttp decides on: an *echo.HTTPError with a 4xx code is
// recorded and replayed, any other error (a 500) rolls back. See
// docs/ECOSYSTEM.md.
package idemecho

import (
	"net/http"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/labstack/echo/v4"
)

// Middleware returns mw.Handler as echo middleware: a key is required on
// the protected methods (see idemhttp.Config.Methods).
func Middleware(mw *idemhttp.Middleware) echo.MiddlewareFunc { return Wrap(mw.Handler) }

// Route returns mw.Route(o) as echo middleware, for a route with its own
// policy (an optional key, anonymous callers, a TTL).
func Route(mw *idemhttp.Middleware, o idemhttp.RouteOptions) echo.MiddlewareFunc {
	return Wrap(mw.Route(o))
}

// Wrap turns net/http middleware into echo middleware. Unlike
// echo.WrapMiddleware, it renders the handler's error inside the wrapped
// handler, so that the middleware sees (and may record) the answer the
// client gets.
func Wrap(middleware func(http.Handler) http.Handler) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			outerRes, outerReq := c.Response(), c.Request()
			middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.SetRequest(r)
				c.SetResponse(echo.NewResponse(w, c.Echo()))
				if err := next(c); err != nil {
					c.Error(err)
				}
			})).ServeHTTP(outerRes, outerReq)
			c.SetResponse(outerRes)
			c.SetRequest(outerReq)
			return nil
		}
	}
}

// SetPrincipal hands the principal that authentication established to
// idemhttp (idem.WithPrincipal on the request's context). Call it in
// the authentication middleware, before Middleware.
func SetPrincipal(c echo.Context, principal string) {
	c.SetRequest(c.Request().WithContext(idem.WithPrincipal(c.Request().Context(), principal)))
}

// Package idemhttp is a stub for idemvet's tests.
package idemhttp

import (
	"net/http"

	"github.com/idemkit/idem"
)

type Config struct{ Leased *idem.Leased }

type RouteOptions struct {
	Leased bool
	Kind   string
}

type Middleware struct{}

func New(g *idem.Guard, cfg *Config) (*Middleware, error) { return &Middleware{}, nil }

func (m *Middleware) Handler(next http.Handler) http.Handler  { return next }
func (m *Middleware) Optional(next http.Handler) http.Handler { return next }
func (m *Middleware) Route(o RouteOptions) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler { return h }
}

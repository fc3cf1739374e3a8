package idemhttp

import (
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/idemkit/idem"
)

// DefaultRoute is the default Config.Route: the pattern that Go's
// ServeMux matched (r.Pattern, such as "POST /transfers/{id}") when it is
// set, which it is when the middleware wraps a handler registered on a
// ServeMux; otherwise the URL path.
func DefaultRoute(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	return r.URL.Path
}

// fingerprint computes a request's fingerprint from its method, route,
// request target (path and query, with the query's parameters sorted), the
// configured headers and the body, canonical JSON when the Content-Type
// says JSON or Config.JSONBodies is set.
//
// The target is always included, even when the route is a pattern: two
// requests to "POST /accounts/{id}/close" with the same key and an empty
// body but different ids are different requests.
func (m *Middleware) fingerprint(r *http.Request, route string, body []byte) string {
	extra := make([]string, 0, 1+len(m.cfg.FingerprintHeaders))
	extra = append(extra, "target "+requestTarget(r.URL))
	for _, name := range m.cfg.FingerprintHeaders {
		// One entry per header line (entries are length-prefixed), so
		// that "a, b" on one line and "a" and "b" on two, which a handler
		// calling Header.Get reads differently, never fingerprint alike.
		// An absent header and an empty one read alike and count alike.
		values := r.Header.Values(name)
		if len(values) == 0 {
			values = []string{""}
		}
		for _, v := range values {
			extra = append(extra, name+": "+v)
		}
	}
	return idem.NewFingerprint(idem.FingerprintInput{
		Method: r.Method,
		Route:  route,
		Body:   body,
		JSON:   m.cfg.JSONBodies || isJSON(r.Header.Get("Content-Type")),
		Extra:  extra,
	})
}

func requestTarget(u *url.URL) string {
	t := u.EscapedPath()
	if u.RawQuery == "" {
		return t
	}
	q := u.RawQuery
	if v, err := url.ParseQuery(q); err == nil {
		q = v.Encode()
	}
	return t + "?" + q
}

// isJSON reports whether a Content-Type names JSON: application/json or
// any type with the +json suffix.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

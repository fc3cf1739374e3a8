package idemclient

import "net/http"

// MaxRedirects is the most redirects one attempt follows (so at most
// MaxRedirects+1 requests per attempt). Only redirects that resend the
// intent unchanged are followed: 307 and 308 to a write; 301, 302, 303, 307
// and 308 to a GET or HEAD.
const MaxRedirects = 5

// redirectPolicy returns the CheckRedirect of the Client's copy of
// Config.HTTPClient, so that it holds whatever client the user configured.
// net/http calls it before following a redirect, with req the request it
// would send next and via the requests sent so far. It lets req go only when
// req resends the intent unchanged: same method (net/http turns a 301, 302
// or 303 to a POST into a GET), same body (net/http replays it through
// GetBody for 307 and 308 and drops it otherwise), the same key in the key
// header, no move from https to http, and at most MaxRedirects hops. The
// user's own CheckRedirect, if any, may then still refuse it. A refusal is
// not an error of the attempt (which would be retried): ErrUseLastResponse
// makes the redirect the attempt's answer, and Do judges it.
func redirectPolicy(keyHeader string, user func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0]
		switch {
		case len(via) > MaxRedirects,
			req.Method != first.Method,
			req.ContentLength != first.ContentLength,
			first.ContentLength != 0 && req.GetBody == nil,
			req.Header.Get(keyHeader) != first.Header.Get(keyHeader),
			first.URL.Scheme == "https" && req.URL.Scheme != "https":
			return http.ErrUseLastResponse
		}
		if user != nil && user(req, via) != nil {
			return http.ErrUseLastResponse
		}
		return nil
	}
}

package idemclient

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idem/idemhttp"
)

// Sentinel errors callers branch on with errors.Is. Do resolves an intent
// exactly when it returns nil or an error matching ErrRejected; after every
// other error the intent stays pending.
var (
	// ErrRejected means the server gave a final client-error answer: a 4xx
	// it marks Idempotent-Replayed (an answer it recorded) or one in
	// Config.FinalStatuses (by default 400, 404, 405, 413 and 422, which
	// can never succeed unchanged). The intent is resolved: sending it
	// again cannot change the answer. The concrete error is a *ProblemError
	// with Final set.
	ErrRejected = errors.New("idemclient: request rejected")

	// ErrAccessDenied means the server refused the request's credentials
	// or permissions (401, 403, or 407 from a proxy) without a recorded
	// answer. Nothing ran, so the intent stays pending: fix the credentials
	// (a refreshed token, best supplied by Config.HTTPClient's transport)
	// and send the same intent again. The concrete error is a *ProblemError.
	ErrAccessDenied = errors.New("idemclient: access denied")

	// ErrRedirected means the server answered with a 3xx that Do neither
	// follows nor takes as a final answer: a 301 or 302 to a write (net/http
	// would resend it as a GET without its body), a 307 or 308 past
	// MaxRedirects or from https to http, or one the configured
	// CheckRedirect refused. Whether the write ran is unknown, so the
	// intent stays pending; usually Intent.URL needs fixing. The concrete
	// error is a *ProblemError; its Header holds the Location.
	ErrRedirected = errors.New("idemclient: redirect not followed")

	// ErrExhausted means the retry budget (Config.MaxAttempts or
	// Config.MaxElapsed) ran out before a final answer. The outcome is
	// unknown, so the intent stays pending and may be resumed later with
	// the same key. The concrete error is an *ExhaustedError.
	ErrExhausted = errors.New("idemclient: retries exhausted")

	// ErrIntentExpired means the intent is older than Config.MaxIntentAge.
	// The server may have forgotten its key, so sending it again could
	// apply it twice; it is not sent, and it stays pending for the
	// application to reconcile.
	ErrIntentExpired = errors.New("idemclient: intent too old to send safely")

	// ErrNotFound is returned by Journal.MarkResolved for a key the
	// journal does not hold.
	ErrNotFound = errors.New("idemclient: intent not in journal")

	// ErrUnreadableIntent matches the error a Journal returns for an entry
	// it holds but cannot read (a corrupt or unreadable file, say). Pending
	// returns it beside the intents it could read, naming each bad entry;
	// the entry is kept, for the application to repair or remove.
	ErrUnreadableIntent = errors.New("idemclient: journal entry unreadable")
)

// ProblemError is an HTTP answer that Do does not return as a success: a
// 3xx it does not follow, a 4xx or a 5xx. It is returned alone when it ends
// Do (matching ErrRejected when Final, ErrAccessDenied or ErrRedirected
// otherwise, as their docs say) and wrapped in an *ExhaustedError when it
// was the last of a series of retried answers.
type ProblemError struct {
	// Method and URL name the intent's request.
	Method string
	URL    string

	// Status is the response's HTTP status code.
	Status int

	// Problem holds the decoded RFC 9457 problem details when the response
	// was application/problem+json; otherwise it is zero.
	Problem idemhttp.Problem

	// Header and Body are the response's header and body.
	Header http.Header
	Body   []byte

	// Replayed reports whether the server replayed a recorded answer
	// (Idempotent-Replayed: true).
	Replayed bool

	// Final reports whether the answer settled the intent: Do marked it
	// resolved, and the error matches ErrRejected. When false the intent
	// stays pending.
	Final bool

	// Attempts is the number of attempts made so far.
	Attempts int
}

func (e *ProblemError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "idemclient: %s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if loc := e.Header.Get("Location"); e.Status >= 300 && e.Status < 400 && loc != "" {
		fmt.Fprintf(&b, " to %s", loc)
	}
	if e.Problem.Title != "" {
		b.WriteString(": ")
		b.WriteString(e.Problem.Title)
	}
	if e.Problem.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Problem.Detail)
	}
	switch {
	case e.Final:
	case e.Status >= 300 && e.Status < 400:
		fmt.Fprintf(&b, ": not followed (a redirect is followed only when it keeps the method, body and key, at most %d in a row, never from https to http); the intent stays pending", MaxRedirects)
	default:
		b.WriteString("; the intent stays pending")
	}
	return b.String()
}

// Is reports whether target is the sentinel the answer matches: ErrRejected
// when Final; ErrAccessDenied for a 401, 403 or 407 that is not;
// ErrRedirected for a 3xx.
func (e *ProblemError) Is(target error) bool {
	switch target {
	case ErrRejected:
		return e.Final
	case ErrAccessDenied:
		return !e.Final && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusProxyAuthRequired)
	case ErrRedirected:
		return !e.Final && e.Status >= 300 && e.Status < 400
	}
	return false
}

// ExhaustedError is returned when the retry budget ran out. It matches
// ErrExhausted with errors.Is and unwraps to the last attempt's error: a
// network error or a *ProblemError carrying the last response (for example
// a 503).
type ExhaustedError struct {
	// Attempts is the number of attempts made.
	Attempts int

	// Last is the error of the last attempt.
	Last error
}

func (e *ExhaustedError) Error() string {
	var pe *ProblemError
	if errors.As(e.Last, &pe) { // its text says that the intent stays pending
		return fmt.Sprintf("idemclient: retries exhausted after %d attempts; last attempt: %v", e.Attempts, e.Last)
	}
	return fmt.Sprintf("idemclient: retries exhausted after %d attempts; the intent stays pending; last attempt: %v", e.Attempts, e.Last)
}

// Is reports whether target is ErrExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Unwrap returns the last attempt's error.
func (e *ExhaustedError) Unwrap() error { return e.Last }

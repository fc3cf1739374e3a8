package idemclient

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idem/idemhttp"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrRejected means the server gave a final client-error answer (a 4xx
	// that is not retried, such as 400 or 422, or any replayed 4xx). The
	// intent is resolved: sending it again cannot change the answer. The
	// concrete error is a *ProblemError.
	ErrRejected = errors.New("idemclient: request rejected")

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
)

// ProblemError is an HTTP answer with status 400 or above. It is returned
// alone for a final answer (matching ErrRejected for a 4xx) and wrapped in an
// *ExhaustedError when it was the last of a series of retried answers.
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

	// Attempts is the number of attempts made so far.
	Attempts int
}

func (e *ProblemError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "idemclient: %s %s: %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Problem.Title != "" {
		b.WriteString(": ")
		b.WriteString(e.Problem.Title)
	}
	if e.Problem.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Problem.Detail)
	}
	return b.String()
}

// Is reports whether target is ErrRejected and the status is a 4xx.
func (e *ProblemError) Is(target error) bool {
	return target == ErrRejected && e.Status >= 400 && e.Status < 500
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
	return fmt.Sprintf("idemclient: retries exhausted after %d attempts; intent left pending: %v", e.Attempts, e.Last)
}

// Is reports whether target is ErrExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// Unwrap returns the last attempt's error.
func (e *ExhaustedError) Unwrap() error { return e.Last }

package idemhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/httpwire"
)

var (
	errRequestTooLarge = errors.New("idemhttp: request body is too large")
	errUnreadableBody  = errors.New("idemhttp: request body could not be read")
)

// readBody reads the whole request body, refusing one over limit without
// reading more than limit+1 bytes (or any, if Content-Length says so).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errRequestTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	b, err := httpwire.ReadBody(r.Body, r.ContentLength, limit)
	if err != nil {
		if errors.Is(err, httpwire.ErrBodyTooLarge) {
			return nil, errRequestTooLarge
		}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, errRequestTooLarge
		}
		return nil, fmt.Errorf("%w: %w", errUnreadableBody, err)
	}
	return b, nil
}

// interruptAtEnd makes a body read that is blocked when r's context ends
// (its deadline runs out, or its client leaves) fail at once with a
// timeout, so that a client trickling its body cannot hold its slot, its
// buffer and its connection past the request's deadline. It returns a
// function that stops this; call it once the body has been read. Where the
// connection's read deadline cannot be set (HTTP/2 streams, some
// ResponseWriter wrappers), the read ends with the body or the server's
// own timeouts.
func interruptAtEnd(w http.ResponseWriter, r *http.Request) (stop func()) {
	if r.Body == nil || r.Body == http.NoBody || r.Context().Done() == nil {
		return func() {}
	}
	rc := http.NewResponseController(w)
	after := context.AfterFunc(r.Context(), func() {
		_ = rc.SetReadDeadline(time.Now())
	})
	return func() { after() }
}

// endedOutcome tells why a request whose body could not be read, or whose
// context ended before the store was asked, cannot go on: the time to
// receive it ran out (a read deadline such as http.Server.ReadTimeout, or
// the request context's deadline), or the client left (the context was
// cancelled). It returns false when the request did not end: the body was
// unreadable for another reason.
func endedOutcome(r *http.Request, readErr error) (idem.Outcome, bool) {
	if readErr != nil {
		if errors.Is(readErr, os.ErrDeadlineExceeded) || errors.Is(readErr, context.DeadlineExceeded) {
			return idem.OutcomeRequestTimeout, true
		}
		if ne, ok := errors.AsType[net.Error](readErr); ok && ne.Timeout() {
			return idem.OutcomeRequestTimeout, true
		}
	}
	switch err := r.Context().Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		return idem.OutcomeRequestTimeout, true
	case err != nil:
		return idem.OutcomeCanceled, true
	}
	return "", false
}

// Bounds of discardRest.
const (
	discardMaxBytes = 64 << 20
	discardMaxTime  = 5 * time.Second
)

// discardRest reads and drops what is left of a refused request's body, up
// to discardMaxBytes or discardMaxTime, after the answer has been sent. A
// client that writes its whole body before reading (many do) then reads the
// 413 instead of a connection reset, which it would see if the server closed
// the connection with unread data in flight.
func discardRest(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(discardMaxTime))
	_, _ = io.CopyN(io.Discard, r.Body, discardMaxBytes)
}

// withBody returns r with its body replaced by the buffered one.
func withBody(r *http.Request, body []byte) *http.Request {
	r2 := *r
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r2.ContentLength = int64(len(body))
	return &r2
}

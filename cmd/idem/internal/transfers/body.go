package transfers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/idemkit/idem/internal/httpwire"
)

// maxBody is the largest request body the service reads.
const maxBody = 1 << 20

// writeSlack is the time an answer has to reach the client beyond the
// request's own bounds.
const writeSlack = 10 * time.Second

// bound sets a request's connection deadlines. The body must arrive within
// Config.BodyTimeout, under a read deadline that net/http lifts once the
// body has been read to its end (so it never cuts the work that follows);
// a body that is never read to its end keeps it, which then bounds the
// server's reading of the rest after the handler returns. The answer must
// be written within BodyTimeout + RequestTimeout + writeSlack, so that a
// client that does not read it cannot hold the connection, nor the
// database connection of a streamed listing, for ever.
func (s *Service) bound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(now.Add(s.cfg.BodyTimeout))
		}
		_ = rc.SetWriteDeadline(now.Add(s.cfg.BodyTimeout + s.cfg.RequestTimeout + writeSlack))
		next.ServeHTTP(w, r)
	})
}

// readBody reads r's whole body. When it cannot, it answers the request
// itself and returns false: 413 for a body over maxBody, 408 for a client
// too slow to send it (the store is not involved), 400 otherwise.
func (s *Service) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > maxBody {
		tooLarge(w, r)
		return nil, false
	}
	body, err := httpwire.ReadBody(r.Body, r.ContentLength, maxBody)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		problem(w, http.StatusRequestTimeout, "request-timeout", "Request body too slow",
			fmt.Sprintf("the request body did not arrive within %s; nothing was done", s.cfg.BodyTimeout))
		return nil, false
	case errors.Is(err, httpwire.ErrBodyTooLarge):
		tooLarge(w, r)
		return nil, false
	case err != nil:
		problem(w, http.StatusBadRequest, "unreadable-body", "Unreadable body", err.Error())
		return nil, false
	}
	return body, true
}

// tooLarge answers 413, then reads the rest of the body (boundedly) so
// that a client still sending reads the 413 instead of a connection reset.
func tooLarge(w http.ResponseWriter, r *http.Request) {
	problem(w, http.StatusRequestEntityTooLarge, "request-too-large", "Request too large", fmt.Sprintf("the body must not exceed %d bytes", maxBody))
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.CopyN(io.Discard, r.Body, 64<<20)
}

// decode reads r's body as one JSON document into v. When it cannot, it
// answers the request itself and returns false.
func (s *Service) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := s.readBody(w, r)
	if !ok {
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		problem(w, http.StatusBadRequest, "malformed-json", "Malformed JSON", err.Error())
		return false
	}
	return true
}

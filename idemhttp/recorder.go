package idemhttp

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// errResponseTooLarge is returned by recorder.Write once the response is
// over the recording limit.
var errResponseTooLarge = errors.New("idemhttp: response is too large to record")

// recorder is the ResponseWriter a protected handler writes to. It buffers
// the whole response, since nothing may reach the client before the
// response is recorded in the handler's transaction.
//
// It deliberately implements neither http.Flusher nor http.Hijacker and has
// no Unwrap method: a protected response cannot be streamed, and a
// connection taken over could not be recorded. http.ResponseController
// reports http.ErrNotSupported for Flush and Hijack; it can still set the
// connection's deadlines, which recorder forwards.
type recorder struct {
	w        http.ResponseWriter // the real writer, for deadlines only
	header   http.Header
	status   int
	body     []byte
	limit    int64
	tooLarge bool
}

// newRecorder returns a recorder in front of w; w is nil when a completer
// serves a stored request, which has no connection.
func newRecorder(w http.ResponseWriter, limit int64) *recorder {
	if w == nil {
		return &recorder{header: make(http.Header), limit: limit}
	}
	// The handler sees the headers that outer middleware already set, as
	// it would without us.
	return &recorder{w: w, header: w.Header().Clone(), limit: limit}
}

func (rec *recorder) Header() http.Header { return rec.header }

// WriteHeader records the status. Informational (1xx) statuses are
// dropped: nothing can be sent before the final response is recorded.
func (rec *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("idemhttp: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if rec.status != 0 || code < 200 {
		return
	}
	rec.status = code
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(rec.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if rec.tooLarge {
		return 0, errResponseTooLarge
	}
	if int64(len(rec.body))+int64(len(b)) > rec.limit {
		rec.tooLarge = true
		return 0, errResponseTooLarge
	}
	rec.body = append(rec.body, b...)
	return len(b), nil
}

// WriteString lets io.WriteString skip a copy.
func (rec *recorder) WriteString(s string) (int, error) {
	return rec.Write([]byte(s))
}

// SetReadDeadline is found by http.ResponseController.
func (rec *recorder) SetReadDeadline(t time.Time) error {
	if rec.w == nil {
		return http.ErrNotSupported
	}
	return http.NewResponseController(rec.w).SetReadDeadline(t)
}

// SetWriteDeadline is found by http.ResponseController.
func (rec *recorder) SetWriteDeadline(t time.Time) error {
	if rec.w == nil {
		return http.ErrNotSupported
	}
	return http.NewResponseController(rec.w).SetWriteDeadline(t)
}

// finalStatus is the status the handler sent, 200 if it wrote nothing.
func (rec *recorder) finalStatus() int {
	if rec.status == 0 {
		return http.StatusOK
	}
	return rec.status
}

// bodyAllowed reports whether a response with the status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// writeResponse sends a complete buffered response whose headers are
// already on w, with Content-Length set from the body.
func writeResponse(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Del("Content-Length")
	if bodyAllowed(status) {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	} else {
		body = nil
	}
	w.WriteHeader(status)
	if len(body) > 0 {
		_, _ = w.Write(body)
	}
}

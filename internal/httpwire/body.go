package httpwire

import (
	"errors"
	"io"
)

// ErrBodyTooLarge means the body is longer than the limit.
var ErrBodyTooLarge = errors.New("httpwire: body is too large")

// ReadBody reads all of body, which must not be longer than limit bytes.
// contentLength is the request's Content-Length, or -1 when unknown: when
// it is known, the buffer is allocated once at that size; otherwise it
// grows as io.ReadAll's does. A body longer than limit, or longer than its
// Content-Length said, fails with ErrBodyTooLarge without being read further.
func ReadBody(body io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength > limit {
		return nil, ErrBodyTooLarge
	}
	if contentLength < 0 {
		b, err := io.ReadAll(io.LimitReader(body, limit+1))
		if err != nil {
			return nil, err
		}
		if int64(len(b)) > limit {
			return nil, ErrBodyTooLarge
		}
		return b, nil
	}
	b := make([]byte, contentLength, contentLength+1)
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	// Nothing may follow (net/http's own bodies end at Content-Length;
	// another reader might not): one more byte of room to find out.
	extra := b[contentLength : contentLength+1]
	for {
		n, err := body.Read(extra)
		if n > 0 {
			return nil, ErrBodyTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

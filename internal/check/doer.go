package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// Request is one request the engine sends.
type Request struct {
	Method string
	// URL is absolute for ClientDoer; HandlerDoer also takes a path.
	URL    string
	Header http.Header
	Body   []byte
}

// Response is the whole answer to a Request.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Doer sends one request and returns the whole answer. The engine calls
// it from several goroutines at once (rule 2). An error means there was
// no answer.
type Doer interface {
	Do(ctx context.Context, req *Request) (*Response, error)
}

// DoerFunc is a function that is a Doer.
type DoerFunc func(ctx context.Context, req *Request) (*Response, error)

// Do calls f.
func (f DoerFunc) Do(ctx context.Context, req *Request) (*Response, error) { return f(ctx, req) }

// MaxBody is the longest answer body a Doer reads; a longer one is an
// error.
const MaxBody = 16 << 20

// ClientDoer sends requests over the network with c. Redirects are not
// followed: a 3xx is an answer like any other. A nil c is a client with
// enough idle connections per host for rule 2's burst.
func ClientDoer(c *http.Client) Doer {
	if c == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 128
		c = &http.Client{Transport: t}
	}
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return DoerFunc(func(ctx context.Context, r *Request) (*Response, error) {
		req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(r.Body))
		if err != nil {
			return nil, err
		}
		req.Header = r.Header.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		if h := req.Header.Get("Host"); h != "" {
			req.Host = h
			req.Header.Del("Host")
		}
		res, err := cc.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		body, err := readBody(res.Body)
		if err != nil {
			return nil, err
		}
		return &Response{Status: res.StatusCode, Header: res.Header, Body: body}, nil
	})
}

func readBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBody {
		return nil, fmt.Errorf("answer body over %d bytes", MaxBody)
	}
	return b, nil
}

// HandlerDoer hands requests to h in the calling goroutine, as net/http
// would, and records its answer. A URL without a scheme and host is taken
// as a path on host example.com. A panic in h is returned as an error.
func HandlerDoer(h http.Handler) Doer {
	return DoerFunc(func(ctx context.Context, r *Request) (res *Response, err error) {
		target := r.URL
		if !strings.Contains(target, "://") {
			target = "http://example.com" + target
		}
		req, err := http.NewRequestWithContext(ctx, r.Method, target, bytes.NewReader(r.Body))
		if err != nil {
			return nil, err
		}
		req.Header = r.Header.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		req.RemoteAddr = "192.0.2.1:1234"
		req.RequestURI = req.URL.RequestURI()
		rec := httptest.NewRecorder()
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					res, err = nil, errors.New("the handler aborted the response")
					return
				}
				res, err = nil, fmt.Errorf("the handler panicked: %v", p)
			}
		}()
		h.ServeHTTP(rec, req)
		out := rec.Result()
		body, err := readBody(out.Body)
		if err != nil {
			return nil, err
		}
		return &Response{Status: out.StatusCode, Header: out.Header, Body: body}, nil
	})
}

// withTimeout bounds one request.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

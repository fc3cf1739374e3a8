package history

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idem/idemhttp"
)

// Recorder collects the operations of a run. It is safe for concurrent
// use; the zero value is ready.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Add records a finished operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Begin starts an attempt of key by client now; call End on what it
// returns with the answer.
func (r *Recorder) Begin(client int, key string) *Pending {
	return &Pending{r: r, op: Op{Key: key, Client: client, Start: time.Now()}}
}

// Ops returns a copy of the operations recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Pending is an attempt that has started.
type Pending struct {
	r  *Recorder
	op Op
}

// End records the attempt as ended now with a.
func (p *Pending) End(a Answer) {
	p.op.End, p.op.Answer = time.Now(), a
	p.r.Add(p.op)
}

// Transport returns an http.RoundTripper that sends through next
// (http.DefaultTransport if nil) and records every request carrying an
// Idempotency-Key header: it reads the response's body to digest it and
// hands the caller an equal copy. Requests without the header pass
// through unrecorded. client names the sender in the visualization.
func (r *Recorder) Transport(client int, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{r: r, client: client, next: next}
}

type transport struct {
	r      *Recorder
	client int
	next   http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Idempotency-Key")
	if key == "" {
		return t.next.RoundTrip(req)
	}
	p := t.r.Begin(t.client, key)
	res, err := t.next.RoundTrip(req)
	if err != nil {
		p.End(FromHTTP(0, false, nil, err))
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	p.End(FromHTTP(res.StatusCode, res.Header.Get(idemhttp.ReplayedHeader) == "true", body, err))
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		// The caller sees the body cut where the network cut it.
		res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	}
	return res, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

package idemwebhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemhttp"
	"github.com/idemkit/idem/idemwebhook"
	"github.com/idemkit/idem/memstore"
)

const (
	oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	newSecret = "whsec_dGhlLW5ldy1zZWNyZXQtb2YtdGhlLWVuZHBvaW50"
	badSecret = "whsec_c29tZWJvZHktZWxzZXMtc2VjcmV0"
)

// rig is a receiver over a memstore behind a real HTTP server; its
// handler credits the delivery's id in the store's transaction.
type rig struct {
	srv    *httptest.Server
	store  *memstore.Store
	fail   atomic.Bool // the store's Begin fails
	runs   atomic.Int64
	now    time.Time
	status atomic.Int64 // the handler's status; 200 when 0
	block  chan struct{}
	inside chan struct{}

	mu     sync.Mutex
	events []idemwebhook.Event
}

type failingStore struct {
	idem.Store
	r *rig
}

func (s failingStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if s.r.fail.Load() {
		return nil, nil, errors.New("the database is down")
	}
	return s.Store.Begin(ctx, p)
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{store: memstore.New(), now: time.Unix(1_800_000_000, 0)}
	g, err := idem.New(failingStore{r.store, r}, &idem.Config{DisableLocalInFlight: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := idemwebhook.NewStandard(oldSecret, newSecret)
	if err != nil {
		t.Fatal(err)
	}
	receive := idemwebhook.New(g, v, &idemwebhook.Config{
		Endpoint: "test", MaxBody: 1024, Now: func() time.Time { return r.now },
		Observer: idemwebhook.ObserverFunc(func(_ context.Context, e idemwebhook.Event) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, e)
		}),
	})
	r.srv = httptest.NewServer(receive(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.inside != nil {
			r.inside <- struct{}{}
			<-r.block
		}
		tx, ok := memstore.TxFrom(req.Context())
		if !ok {
			t.Error("the handler runs without the store's transaction")
		}
		body, _ := io.ReadAll(req.Body)
		tx.Set("delivery:"+idemwebhook.DeliveryID(req), string(body))
		r.runs.Add(1)
		status := int(r.status.Load())
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte("applied " + idemwebhook.DeliveryID(req)))
	})))
	t.Cleanup(r.srv.Close)
	return r
}

// send posts body with Standard Webhooks headers signed by secret at ts.
func (r *rig) send(t *testing.T, secret, id string, ts time.Time, body []byte, edit func(http.Header)) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.srv.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := idemwebhook.StandardHeaders(req.Header, secret, id, ts, body); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (r *rig) problemType(t *testing.T, body string) string {
	t.Helper()
	var p idemhttp.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("not a problem: %q", body)
	}
	return p.Type
}

func (r *rig) lastEvent() idemwebhook.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[len(r.events)-1]
}

func TestRejectionsRecordAndRunNothing(t *testing.T) {
	r := newRig(t)
	body := []byte(`{"type":"deposit.created","data":{"amount":5}}`)
	tol := idemwebhook.DefaultTolerance
	cases := []struct {
		name   string
		secret string
		ts     time.Time
		body   []byte
		edit   func(http.Header)
		status int
		reason idemwebhook.Reason
	}{
		{"missing signature", oldSecret, r.now, body, func(h http.Header) { h.Del(idemwebhook.StandardSignatureHeader) }, 401, idemwebhook.ReasonMissingSignature},
		{"missing id", oldSecret, r.now, body, func(h http.Header) { h.Del(idemwebhook.StandardIDHeader) }, 401, idemwebhook.ReasonMissingSignature},
		{"unknown secret", badSecret, r.now, body, nil, 401, idemwebhook.ReasonBadSignature},
		{"garbled signature", oldSecret, r.now, body, func(h http.Header) { h.Set(idemwebhook.StandardSignatureHeader, "v1,???") }, 401, idemwebhook.ReasonMalformedSignature},
		{"another version only", oldSecret, r.now, body, func(h http.Header) { h.Set(idemwebhook.StandardSignatureHeader, "v1a,abc") }, 401, idemwebhook.ReasonMalformedSignature},
		{"body changed by one byte", oldSecret, r.now, body, func(h http.Header) {}, 401, idemwebhook.ReasonBadSignature},
		{"signature replayed with a new webhook-id", oldSecret, r.now, body, func(h http.Header) { h.Set(idemwebhook.StandardIDHeader, "msg_other") }, 401, idemwebhook.ReasonBadSignature},
		{"timestamp changed after signing", oldSecret, r.now, body, func(h http.Header) {
			h.Set(idemwebhook.StandardTimestampHeader, strconv.FormatInt(r.now.Unix()+1, 10))
		}, 401, idemwebhook.ReasonBadSignature},
		{"stale by one second past the tolerance", oldSecret, r.now.Add(-tol - time.Second), body, nil, 401, idemwebhook.ReasonStaleTimestamp},
		{"future by one second past the tolerance", oldSecret, r.now.Add(tol + time.Second), body, nil, 401, idemwebhook.ReasonFutureTimestamp},
		{"malformed timestamp", oldSecret, r.now, body, func(h http.Header) { h.Set(idemwebhook.StandardTimestampHeader, "soon") }, 401, idemwebhook.ReasonMalformedSignature},
		{"too large", oldSecret, r.now, bytes.Repeat([]byte("x"), 1025), nil, 413, idemwebhook.ReasonTooLarge},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "msg_reject_" + strconv.Itoa(i)
			sent := c.body
			edit := c.edit
			if c.name == "body changed by one byte" {
				// Signed over body, sent with one byte changed.
				req, _ := http.NewRequest(http.MethodPost, r.srv.URL, nil)
				_ = idemwebhook.StandardHeaders(req.Header, c.secret, id, c.ts, body)
				sig := req.Header.Get(idemwebhook.StandardSignatureHeader)
				sent = bytes.Clone(body)
				sent[len(sent)-2] = '6'
				edit = func(h http.Header) { h.Set(idemwebhook.StandardSignatureHeader, sig) }
			}
			resp, got := r.send(t, c.secret, id, c.ts, sent, edit)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, got)
			}
			if e := r.lastEvent(); e.Outcome != idemwebhook.OutcomeRejected || e.Reason != c.reason {
				t.Fatalf("event %+v, want rejected for %s", e, c.reason)
			}
			if r.runs.Load() != 0 {
				t.Fatal("the handler ran for a refused delivery")
			}
			// Nothing was recorded: the same id, correctly signed, runs.
			if resp, got := r.send(t, oldSecret, id, r.now, body, nil); resp.StatusCode != 200 || resp.Header.Get(idemhttp.ReplayedHeader) != "" {
				t.Fatalf("after a refusal, a valid delivery of the id: %d %q", resp.StatusCode, got)
			}
			r.runs.Store(0)
		})
	}
	resp, err := http.Get(r.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

func TestToleranceEdgesAccepted(t *testing.T) {
	r := newRig(t)
	tol := idemwebhook.DefaultTolerance
	for i, ts := range []time.Time{r.now.Add(-tol), r.now.Add(tol)} {
		if resp, body := r.send(t, oldSecret, "msg_edge_"+strconv.Itoa(i), ts, []byte(`{}`), nil); resp.StatusCode != 200 {
			t.Fatalf("signed %s from now: %d %s", ts.Sub(r.now), resp.StatusCode, body)
		}
	}
}

func TestRotationAcceptsEverySecretGiven(t *testing.T) {
	r := newRig(t)
	for i, s := range []string{oldSecret, newSecret} {
		if resp, body := r.send(t, s, "msg_rot_"+strconv.Itoa(i), r.now, []byte(`{}`), nil); resp.StatusCode != 200 {
			t.Fatalf("secret %d: %d %s", i, resp.StatusCode, body)
		}
	}
	// A delivery signed with both (a sender mid-rotation) is accepted.
	body := []byte(`{"both":true}`)
	resp, got := r.send(t, oldSecret, "msg_rot_both", r.now, body, func(h http.Header) {
		sig, _ := idemwebhook.SignStandard(badSecret, "msg_rot_both", r.now, body)
		sig2, _ := idemwebhook.SignStandard(newSecret, "msg_rot_both", r.now, body)
		h.Set(idemwebhook.StandardSignatureHeader, sig+" "+sig2)
	})
	if resp.StatusCode != 200 {
		t.Fatalf("two signatures, one valid: %d %s", resp.StatusCode, got)
	}
	if resp, _ := r.send(t, badSecret, "msg_rot_bad", r.now, body, nil); resp.StatusCode != 401 {
		t.Fatalf("unknown secret: %d", resp.StatusCode)
	}
}

func TestRedeliveryIsReplayedAndRunsOnce(t *testing.T) {
	r := newRig(t)
	body := []byte(`{"n":1}`)
	first, b1 := r.send(t, oldSecret, "msg_once", r.now, body, nil)
	// A retry a minute later is signed again, with a new timestamp.
	second, b2 := r.send(t, newSecret, "msg_once", r.now.Add(time.Minute), body, nil)
	if first.StatusCode != 200 || second.StatusCode != 200 || b1 != b2 {
		t.Fatalf("first %d %q, second %d %q", first.StatusCode, b1, second.StatusCode, b2)
	}
	if second.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatal("the redelivery was not answered from the record")
	}
	if n := r.runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
	if e := r.lastEvent(); e.Outcome != idemwebhook.OutcomeReplayed || !e.Verified {
		t.Fatalf("event %+v", e)
	}
	if v, ok := r.store.Value("delivery:msg_once"); !ok || v != string(body) {
		t.Fatalf("effect %q %v", v, ok)
	}
}

func TestSameIDOtherPayloadConflicts(t *testing.T) {
	r := newRig(t)
	if resp, _ := r.send(t, oldSecret, "msg_c", r.now, []byte(`{"amount":1}`), nil); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	resp, body := r.send(t, oldSecret, "msg_c", r.now, []byte(`{"amount":1000}`), nil)
	if resp.StatusCode != http.StatusConflict || r.problemType(t, body) != idemwebhook.ProblemBase+"conflict" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if r.runs.Load() != 1 {
		t.Fatal("the other payload ran")
	}
	if e := r.lastEvent(); e.Outcome != idemwebhook.OutcomeConflicted || e.Status != 409 {
		t.Fatalf("event %+v", e)
	}
}

func TestHandlerFailureAndStoreFailureAre503AndRetried(t *testing.T) {
	r := newRig(t)
	r.status.Store(500)
	resp, _ := r.send(t, oldSecret, "msg_f", r.now, []byte(`{}`), nil)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("handler 500: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, ok := r.store.Value("delivery:msg_f"); ok {
		t.Fatal("the failed handler's effect was committed")
	}
	r.status.Store(0)
	r.fail.Store(true)
	if resp, _ := r.send(t, oldSecret, "msg_f", r.now, []byte(`{}`), nil); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("store down: %d", resp.StatusCode)
	}
	if e := r.lastEvent(); e.Outcome != idemwebhook.OutcomeUnavailable {
		t.Fatalf("event %+v", e)
	}
	r.fail.Store(false)
	if resp, _ := r.send(t, oldSecret, "msg_f", r.now, []byte(`{}`), nil); resp.StatusCode != 200 || resp.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("retry: %d", resp.StatusCode)
	}
	if n := r.runs.Load(); n != 2 {
		t.Fatalf("runs %d, want 2 (the failed one and the retry)", n)
	}
}

func TestConcurrentDuplicateIs409WithRetryAfter(t *testing.T) {
	r := newRig(t)
	r.block, r.inside = make(chan struct{}), make(chan struct{})
	done := make(chan int)
	go func() {
		resp, _ := r.send(t, oldSecret, "msg_cc", r.now, []byte(`{}`), nil)
		done <- resp.StatusCode
	}()
	<-r.inside
	resp, body := r.send(t, oldSecret, "msg_cc", r.now, []byte(`{}`), nil)
	close(r.block)
	if first := <-done; first != 200 {
		t.Fatalf("first: %d", first)
	}
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("duplicate: %d %s", resp.StatusCode, body)
	}
	if e := r.lastEvent(); e.Outcome != idemwebhook.OutcomeInFlight && e.Outcome != idemwebhook.OutcomeExecuted {
		t.Fatalf("event %+v", e)
	}
}

package idemhttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemkit/idem/idemhttp"
)

// RouteOptions.Wait: a duplicate that arrives while the first request runs
// waits for it and gets its answer as a replay, instead of 409.
func TestWaitReplaysTheRunningRequest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	started, release := make(chan struct{}), make(chan struct{})
	h := &effectHandler{before: func(http.ResponseWriter, *http.Request) {
		close(started)
		<-release
	}}
	route := e.mw.Route(idemhttp.RouteOptions{Wait: time.Minute})(h)
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- serve(route, "POST", "/x", `{"a":1}`, withKey("k")) }()
	<-started
	second := make(chan *httptest.ResponseRecorder, 1)
	go func() { second <- serve(route, "POST", "/x", `{"a":1}`, withKey("k")) }()
	deadline := time.Now().Add(30 * time.Second)
	for e.guard.Stats().LocalInFlight == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	w1, w2 := <-first, <-second
	if w1.Code != http.StatusCreated || w2.Code != http.StatusCreated {
		t.Fatalf("codes %d, %d; want 201, 201 (second: %s)", w1.Code, w2.Code, w2.Body)
	}
	if w2.Header().Get(idemhttp.ReplayedHeader) != "true" || w2.Body.String() != w1.Body.String() {
		t.Fatalf("second: replayed=%q body %s, want the first's body replayed", w2.Header().Get(idemhttp.ReplayedHeader), w2.Body)
	}
	if n := h.runs.Load(); n != 1 {
		t.Fatalf("runs = %d, want 1", n)
	}
}

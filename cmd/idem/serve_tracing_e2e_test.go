package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP trace receiver on loopback that keeps the
// spans it is sent.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if r.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Write(out)
}

// outcomes returns the idem.outcome attribute of every span received.
func (c *collector) outcomes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.spans {
		for _, a := range s.Attributes {
			if a.Key == "idem.outcome" {
				out = append(out, a.Value.GetStringValue())
			}
		}
	}
	return out
}

// idem serve -otlp exports a span per request to the collector, carrying
// the idempotency outcome and the store's timings; on SIGTERM the spans
// not yet sent are flushed.
func TestServeExportsTracesOverOTLP(t *testing.T) {
	t.Parallel()
	col := &collector{}
	cs := httptest.NewServer(col)
	defer cs.Close()
	addr := freePort(t)
	cmd := exec.Command(binary, "serve", "-addr", addr, "-db", filepath.Join(t.TempDir(), "otlp.db"), "-otlp", cs.URL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitHealthy(t, addr)
	put := func(method, path, key, body string) int {
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	put(http.MethodPut, "/accounts/a", "", `{"balance":100}`)
	put(http.MethodPut, "/accounts/b", "", `{"balance":0}`)
	for i, want := range []int{201, 201, 422} {
		body := `{"from":"a","to":"b","amount":5}`
		if i == 2 {
			body = `{"from":"a","to":"b","amount":6}`
		}
		if got := put(http.MethodPost, "/transfers", "k1", body); got != want {
			t.Fatalf("POST %d: %d, want %d", i, got, want)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit on SIGTERM\n%s", stderr.String())
	}
	got := strings.Join(col.outcomes(), ",")
	if got != "executed,replayed,mismatch" {
		t.Fatalf("span outcomes %q, want executed,replayed,mismatch\n%s", got, stderr.String())
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	var storeEvents, cacheHits int
	for _, s := range col.spans {
		for _, e := range s.Events {
			if strings.HasPrefix(e.Name, "idem.store.") {
				storeEvents++
			}
			for _, a := range e.Attributes {
				if a.Key == "idem.replay_cache" && a.Value.GetStringValue() == "hit" {
					cacheHits++
				}
			}
		}
	}
	// The execution's begin and commit; the replay and the mismatch are
	// answered from the Guard's memory (docs/DESIGN.md#in-process).
	if storeEvents != 2 || cacheHits != 2 {
		t.Fatalf("%d store events and %d replay-cache hits exported, want 2 (begin, commit) and 2 (replay, mismatch)", storeEvents, cacheHits)
	}
}

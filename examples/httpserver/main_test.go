package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestHTTPServer runs the example and checks what its doc promises: a
// retry is replayed and applied once, keys are scoped by principal, and a
// request without credentials never reaches the idempotency layer.
func TestHTTPServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, filepath.Join(t.TempDir(), "bank.db")) }()
	base := "http://" + ln.Addr().String()
	send := func(method, path, user, key, body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if user != "" {
			req.Header.Set("Authorization", "Bearer "+user)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header.Get("Idempotent-Replayed")
	}
	const body = `{"to":"bob","amount":100}`
	if status, _, _ := send("POST", "/transfers", "", "t-1", body); status != 401 {
		t.Errorf("no credentials: %d, want 401", status)
	}
	status, first, _ := send("POST", "/transfers", "alice", "t-1", body)
	if status != 201 {
		t.Fatalf("first: %d %s", status, first)
	}
	if status, again, replayed := send("POST", "/transfers", "alice", "t-1", body); status != 201 || again != first || replayed != "true" {
		t.Errorf("retry: %d %q replayed=%q, want the first answer replayed", status, again, replayed)
	}
	if status, _, _ := send("POST", "/transfers", "alice", "t-1", `{"to":"bob","amount":5}`); status != 422 {
		t.Errorf("same key, other body: %d, want 422", status)
	}
	// bob's t-1 is his own: it runs (and is refused: bob has 100).
	if status, msg, replayed := send("POST", "/transfers", "bob", "t-1", `{"to":"alice","amount":500}`); status != 422 || replayed != "" || !strings.Contains(msg, "insufficient") {
		t.Errorf("another user with the same key: %d %q replayed=%q, want his own 422", status, msg, replayed)
	}
	if _, balance, _ := send("GET", "/balance", "alice", "", ""); strings.TrimSpace(balance) != `{"balance":9900}` {
		t.Errorf("alice's balance: %s, want 9900 (paid once)", balance)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

package transfers

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/sqlitestore"
)

// With Config.MaxConcurrent transfers being received, the next
// one is answered 503 too-busy with Retry-After before its body is read, so
// that memory is bounded by the slots and not by how many clients send at
// once (the bound of idemhttp, which reads bodies after this layer, could
// not do that).
func TestTooManyTransfersAreRefusedBeforeTheirBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "bank.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, SQLite(store), &Config{Guard: g, MaxConcurrent: 2, BodyTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	// send writes a POST's headers and part of its body, and returns the
	// connection.
	send := func(key, part string, length int) net.Conn {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(conn, "POST /transfers HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", key, length, part); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	for i := range 2 {
		send(fmt.Sprintf("held-%d", i), `{"from":`, 1000)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(s.slots) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the two held requests were not admitted: %d slots taken", len(s.slots))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The third sends its headers only: it is answered all the same.
	conn := send("third", "", 1000)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("third request: %v (not answered before its body was sent)", err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body.String(), "too-busy") {
		t.Errorf("third request: %d Retry-After=%q %s; want 503 too-busy with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), body.String())
	}
}

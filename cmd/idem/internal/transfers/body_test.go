package transfers_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// timedSetup is setup with the service's time bounds set and its log
// captured.
func timedSetup(t *testing.T, b backend, body, work time.Duration) (client, *syncBuffer) {
	t.Helper()
	store, db := b.open(t)
	g, err := idem.New(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := new(syncBuffer)
	svc, err := transfers.New(context.Background(), db, &transfers.Config{
		Guard: g, BodyTimeout: body, RequestTimeout: work,
		Logger: slog.New(slog.NewTextHandler(log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	c := client{t, srv.URL}
	for id, bal := range map[string]int{"alice": 10000, "bob": 0} {
		if r := c.do("PUT", "/accounts/"+id, "", "", fmt.Sprintf(`{"balance":%d}`, bal)); r.status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, r.status, r.body)
		}
	}
	return c, log
}

// trickle sends a request whose body goes out one byte every gap, and
// returns the response and how long it took to come.
func trickle(t *testing.T, base, method, path, key, body string, gap time.Duration) (*http.Response, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	start := time.Now()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", method, path, key, len(body))
	go func() {
		for i := range len(body) {
			time.Sleep(gap)
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: %v after %s", method, path, err, time.Since(start))
	}
	return res, time.Since(start)
}

// A client too slow to send its body is answered 408, before the
// idempotency layer and without blaming the store (no 503, no error log);
// nothing is applied.
func TestSlowBodyIs408(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c, log := timedSetup(t, b, 300*time.Millisecond, 10*time.Second)
			const body = `{"from":"alice","to":"bob","amount":1}`
			res, took := trickle(t, c.url, "POST", "/transfers", "slow", body, 100*time.Millisecond)
			res.Body.Close()
			if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(res.Header.Get("Content-Type"), "problem+json") {
				t.Errorf("trickled POST: %s %q, want 408 problem+json", res.Status, res.Header.Get("Content-Type"))
			}
			if took > 3*time.Second {
				t.Errorf("408 after %s, want it near the 300ms bound", took)
			}
			res, _ = trickle(t, c.url, "PUT", "/accounts/alice", "", `{"balance":1}`, 100*time.Millisecond)
			res.Body.Close()
			if res.StatusCode != http.StatusRequestTimeout {
				t.Errorf("trickled PUT: %s, want 408", res.Status)
			}
			if strings.Contains(log.String(), "level=ERROR") {
				t.Errorf("a slow client was logged as an error:\n%s", log)
			}
			if a := c.balance("alice"); a != 10000 {
				t.Errorf("alice = %d, want 10000", a)
			}
			// Not recorded: the same key with a prompt body runs.
			if r := c.do("POST", "/transfers", "slow", "", body); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
				t.Errorf("prompt retry: %d %s, want a fresh 201", r.status, r.body)
			}
		})
	}
}

// Config.RequestTimeout counts from the end of the body: a slow but
// timely upload does not eat into the work's time.
func TestRequestTimeoutStartsAfterBody(t *testing.T) {
	t.Parallel()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c, _ := timedSetup(t, b, 30*time.Second, time.Second)
			const body = `{"from":"alice","to":"bob","amount":1}` // 2.3 s at 60 ms a byte
			res, took := trickle(t, c.url, "POST", "/transfers", "upload", body, 60*time.Millisecond)
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				t.Errorf("upload of %s, then the work: %s, want 201", took, res.Status)
			}
		})
	}
}

// The body's read deadline is lifted once the body has arrived: work that
// lasts longer than Config.BodyTimeout (here, waiting for a row lock) is
// not cut by it.
func TestBodyTimeoutDoesNotCutTheWork(t *testing.T) {
	t.Parallel()
	var dsn string
	pg := backend{"Postgres", func(t *testing.T) (idem.Store, *transfers.Database) {
		var schema string
		schema, dsn = pgtest.Schema(t)
		s, err := pgstore.Open(context.Background(), dsn, &pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, transfers.Postgres(s)
	}, nil}
	c, _ := timedSetup(t, pg, 200*time.Millisecond, 30*time.Second)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT FROM accounts WHERE id = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan response, 1)
	go func() { done <- c.do("POST", "/transfers", "long", "", `{"from":"alice","to":"bob","amount":1}`) }()
	time.Sleep(time.Second) // five body timeouts
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.status != 201 {
		t.Errorf("transfer that waited 1s for a lock: %d %s, want 201", r.status, r.body)
	}
}

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/pgtest"
)

// E8 (docs/DESIGN.md) with a stalled database: a request whose statements
// wait on a lock held elsewhere does not hang; past -request-timeout it is
// rolled back and answered 503 with Retry-After, and once the lock is gone
// its retry with the same key applies the transfer exactly once.
func TestStalledDatabaseAnswers503(t *testing.T) {
	t.Parallel()
	_, dsn := pgtest.Schema(t)
	addr := freePort(t)
	cmd := exec.Command(binary, "serve", "-addr", addr, "-db", dsn, "-request-timeout", "1s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHealthy(t, addr)
	client := &http.Client{Timeout: 30 * time.Second} // a hang fails the test
	send := func(method, path, key, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	send("PUT", "/accounts/a", "", `{"balance":100}`)
	send("PUT", "/accounts/b", "", `{"balance":0}`)

	// Another session holds account a's row.
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT FROM accounts WHERE id = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	const body = `{"from":"a","to":"b","amount":5}`
	key := "k-stall-" + strconv.FormatInt(time.Now().UnixNano(), 36) // unique wherever the records table is
	res := send("POST", "/transfers", key, body)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("POST while the row is held: %s, Retry-After %q; want 503 with Retry-After", res.Status, res.Header.Get("Retry-After"))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// The retry, as a client would send it: 409 or 503 while the server
	// notices the abandoned transaction, then 201 once.
	var got int
	for range 100 {
		res := send("POST", "/transfers", key, body)
		got = res.StatusCode
		if got != http.StatusConflict && got != http.StatusServiceUnavailable {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got != http.StatusCreated {
		t.Fatalf("retry after the lock was released: %d, want 201", got)
	}
	res, err = http.Get("http://" + addr + "/transfers")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct{ Count int }
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if list.Count != 1 {
		t.Errorf("transfers = %d, want 1", list.Count)
	}
}

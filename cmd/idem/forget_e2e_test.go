package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/pgtest"
)

// forgetToken is the -admin-token of the forget tests.
const forgetToken = "forget-test-token-0123456789"

// postTransfer sends a transfer of 1 from a to b with key, wants 201 and
// returns whether it was a replay.
func postTransfer(t *testing.T, s *server, key string) (replayed bool) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+s.addr+"/transfers", strings.NewReader(`{"from":"a","to":"b","amount":1}`))
	req.Header.Set("Idempotency-Key", key)
	res, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 201 {
		t.Fatalf("POST /transfers %s: %d %s", key, res.StatusCode, body)
	}
	return res.Header.Get("Idempotent-Replayed") == "true"
}

// The console forgets a completed transfer that the server holds in its
// replay cache: the next request with the key runs the transfer again at
// once, as the console says.
func TestConsoleForgetRunsTheKeyAgain(t *testing.T) {
	t.Parallel()
	admin := freePort(t)
	s := startServe(t, "-db", filepath.Join(t.TempDir(), "idem.db"), "-admin", admin, "-admin-token", forgetToken)
	s.accounts(t)
	if postTransfer(t, s, "f-1") || !postTransfer(t, s, "f-1") {
		t.Fatal("want a first execution, then a replay")
	}
	console := func(method, path string, form url.Values) (int, string) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, "http://"+admin+path, body)
		req.Header.Set("Authorization", "Bearer "+forgetToken)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		c := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Location") + string(b)
	}
	status, page := console("GET", "/", nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if status != 200 || m == nil {
		t.Fatalf("GET / of the console: %d, no CSRF token in\n%s", status, page)
	}
	status, loc := console("POST", "/forget", url.Values{"csrf": {m[1]}, "scope": {"anonymous"}, "key": {"f-1"}, "actor": {"ops"}, "reason": {"the transfer was undone"}})
	if status != http.StatusSeeOther || strings.Contains(loc, "err=") {
		t.Fatalf("POST /forget: %d %s", status, loc)
	}
	if postTransfer(t, s, "f-1") {
		t.Fatal("the request after the console's forget was replayed from the server's memory, want it run again")
	}
	if n := s.transferCount(t); n != 2 {
		t.Errorf("%d transfers, want 2", n)
	}
}

// idem forget beside a running server, on PostgreSQL: when the command
// returns, the server's replay cache no longer serves the record.
func TestForgetCommandBesideARunningServer(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	_, dsn := pgtest.Schema(t)
	s := startServe(t, "-db", dsn)
	s.accounts(t)
	if postTransfer(t, s, "f-2") || !postTransfer(t, s, "f-2") {
		t.Fatal("want a first execution, then a replay")
	}
	var out, errOut bytes.Buffer
	if err := (&Main{Stdout: &out, Stderr: &errOut}).Run(context.Background(), []string{"forget", "-db", dsn, "anonymous", "f-2", "--reason", "undone"}); err != nil {
		t.Fatalf("forget: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "waiting 5s for running servers") {
		t.Errorf("forget's stderr = %q, want the wait announced", errOut.String())
	}
	if postTransfer(t, s, "f-2") {
		t.Fatal("the request after idem forget returned was replayed from the server's memory, want it run again")
	}
	if n := s.transferCount(t); n != 2 {
		t.Errorf("%d transfers, want 2", n)
	}
}

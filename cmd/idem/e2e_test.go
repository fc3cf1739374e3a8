package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/demo"
	"github.com/idemkit/idem/internal/history"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/sqlitestore"
)

// binary is the idem command built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idem-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "idem")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestDemo runs the incident end to end with real processes: the server is
// started, driven through the faulty network, killed with SIGKILL and
// restarted. With idem nothing is duplicated or lost; under the same seed
// the two broken modes show duplicates, proving the audit can see them.
func TestDemo(t *testing.T) {
	for _, tt := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return "" }},
		{"Postgres", func(t *testing.T) string { return pgtest.Require(t) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var progress bytes.Buffer
			reports, err := demo.Run(context.Background(), &demo.Config{
				Binary: binary, DB: tt.db(t), Seed: 7, Intents: 120, Clients: 6, Kills: 2,
				Progress: &progress,
			})
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, progress.String())
			}
			if len(reports) != 3 {
				t.Fatalf("got %d reports, want 3", len(reports))
			}
			for _, r := range reports {
				if r.Kills != 2 {
					t.Errorf("%s: server killed %d times, want 2", r.Mode, r.Kills)
				}
				if !r.Conserved {
					t.Errorf("%s: money not conserved", r.Mode)
				}
				if r.Faults["dropped"] == 0 || r.Faults["delayed"] == 0 || r.Faults["reset"] == 0 {
					t.Errorf("%s: faults %v, want every kind injected", r.Mode, r.Faults)
				}
				switch r.Mode {
				case demo.ModeIdem:
					// Every attempt the clients made, checked as a
					// history of keys (internal/history).
					if res := history.Require(t, r.History); res.Ops == 0 {
						t.Errorf("idem: no attempt recorded in the history")
					}
					if r.Duplicated != 0 || r.Lost != 0 || r.Applied != r.Intents || !r.Correct {
						t.Errorf("idem: %+v; want every intent applied exactly once", r)
					}
				default:
					if r.Duplicated == 0 {
						t.Errorf("%s: no duplicates under faults; the demo cannot see the failure it exists to show (%+v)", r.Mode, r)
					}
				}
			}
			if t.Failed() {
				t.Log(progress.String())
			}
		})
	}
}

func TestDemoCommandPrintsTable(t *testing.T) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(binary, "demo", "-intents", "40", "-kills", "1", "-seed", "3")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("idem demo: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"mode", "no-key", "key-per-attempt", "idem", "duplicated", "money conserved"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "intents done") && !strings.Contains(errOut.String(), "done:") {
		t.Errorf("no progress on stderr:\n%s", errOut.String())
	}
}

func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	db := filepath.Join(t.TempDir(), "serve.db")
	cmd := exec.Command(binary, "serve", "-addr", addr, "-db", db)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitHealthy(t, addr)
	put := func(path, body string, header ...string) *http.Response {
		req, _ := http.NewRequest(http.MethodPut, "http://"+addr+path, strings.NewReader(body))
		if strings.HasPrefix(path, "/transfers") {
			req.Method = http.MethodPost
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	put("/accounts/a", `{"balance":100}`)
	put("/accounts/b", `{"balance":0}`)
	if res := put("/transfers", `{"from":"a","to":"b","amount":5}`, "Idempotency-Key", "k1"); res.StatusCode != 201 {
		t.Fatalf("POST /transfers: %s", res.Status)
	}
	if res := put("/transfers", `{"from":"a","to":"b","amount":5}`, "Idempotency-Key", "k1"); res.StatusCode != 201 || res.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry of POST /transfers: %s replayed=%q", res.Status, res.Header.Get("Idempotent-Replayed"))
	}
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`idem_requests_total{outcome="executed",transport="http"} 1`, `idem_requests_total{outcome="replayed",transport="http"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Read the log to its end before Wait: Wait closes the pipe, and lines
	// still unread when it does are lost.
	var log []string
	for l := range lines {
		log = append(log, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v, want exit 0", err)
	}
	all := strings.Join(log, "\n")
	if !strings.Contains(all, "listening") || !strings.Contains(all, addr) || !strings.Contains(all, "shutting down") {
		t.Errorf("serve log lacks its address or shutdown:\n%s", all)
	}

	// inspect and sweep read the same file afterwards.
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: io.Discard}
	if err := m.Run(context.Background(), []string{"inspect", "-db", db, "anonymous", "k1"}); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	for _, want := range []string{"completed", "201", "v1:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out.String())
		}
	}
	if err := m.Run(context.Background(), []string{"inspect", "-db", db, "anonymous", "nope"}); err == nil {
		t.Error("inspect of a missing key: want an error")
	}
	// The key as the client may have sent it: an sf-string.
	out.Reset()
	if err := m.Run(context.Background(), []string{"inspect", "-db", db, "anonymous", `"k1"`}); err != nil || !strings.Contains(out.String(), "completed") {
		t.Errorf("inspect with the quoted key: %v\n%s", err, out.String())
	}
}

// The routes a load balancer and a client following Location use: /readyz
// answers 200 while the database does, and the 201's Location answers the
// transfer.
func TestServeRoutes(t *testing.T) {
	t.Parallel()
	s := startServe(t, "-db", filepath.Join(t.TempDir(), "routes.db"))
	if status, body := s.do(t, "GET", "/readyz", "", ""); status != 200 {
		t.Errorf("/readyz: %d %s, want 200", status, body)
	}
	s.accounts(t)
	req, _ := http.NewRequest("POST", "http://"+s.addr+"/transfers", strings.NewReader(`{"from":"a","to":"b","amount":5}`))
	req.Header.Set("Idempotency-Key", "loc")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	created, _ := io.ReadAll(res.Body)
	res.Body.Close()
	loc := res.Header.Get("Location")
	if status, body := s.do(t, "GET", loc, "", ""); res.StatusCode != 201 || status != 200 || body != string(created) {
		t.Errorf("GET %s: %d %s, want 200 %s", loc, status, body, created)
	}
}

func TestServeWithIdempotencyOffWarns(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	var stderr bytes.Buffer
	cmd := exec.Command(binary, "serve", "-addr", addr, "-db", filepath.Join(t.TempDir(), "off.db"), "-idempotency", "off")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, addr)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if !strings.Contains(stderr.String(), "IDEMPOTENCY IS OFF") {
		t.Errorf("no loud warning in:\n%s", stderr.String())
	}
}

func TestSweepDeletesExpiredRecords(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "sweep.db")
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-48 * time.Hour)
	g, _ := idem.New(s, &idem.Config{Now: func() time.Time { return past }})
	for _, k := range []string{"a", "b", "c"} {
		if _, _, err := g.Do(ctx, idem.Request{Key: k}, func(context.Context) (idem.Result, error) { return idem.Result{Status: 200}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	live, _ := idem.New(s, nil)
	if _, _, err := live.Do(ctx, idem.Request{Key: "live"}, func(context.Context) (idem.Result, error) { return idem.Result{Status: 200}, nil }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out bytes.Buffer
	if err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(ctx, []string{"sweep", "-db", db}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != "deleted 3 expired record(s)" {
		t.Errorf("sweep printed %q, want 3 deleted", got)
	}
}

// A store that cannot delete expired records is an error naming what it
// lacks, not a panic on an unchecked type assertion.
func TestSweepNeedsExpiredDeleter(t *testing.T) {
	t.Parallel()
	var store struct{ idem.Store } // hides the optional interfaces
	store.Store = memstore.New()
	n, err := sweep(context.Background(), store, 10)
	if err == nil || n != 0 || !strings.Contains(err.Error(), "ExpiredDeleter") {
		t.Errorf("sweep(a store without DeleteExpired) = %d, %v; want an error naming idem.ExpiredDeleter", n, err)
	}
}

func TestParseKeyArg(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`k1`:        "k1",
		`"k1"`:      "k1",
		` "k1" `:    "k1",
		`"a\"b"`:    `a"b`,
		`a,b`:       "a,b", // quoted by its client; typed as it is
		`0190-abc`:  "0190-abc",
		`"a;b"`:     "a;b",
		`"":`:       "",
		`"open`:     "",
		`has space`: "",
	} {
		got, err := parseKeyArg(in)
		if want == "" {
			if err == nil {
				t.Errorf("parseKeyArg(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("parseKeyArg(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"nope"},
		{"serve", "-idempotency", "maybe"},
		{"serve", "-ttl", "0s"},
		{"serve", "-replay-probe"},
		{"serve", "extra"},
		{"serve", "-no-such-flag"},
		{"serve", "-pool", "4"}, // SQLite
		{"serve", "-db", "postgres://h/db", "-pool", "0"},
		{"serve", "-body-timeout", "0s"},
		{"serve", "-idle-timeout", "-1s"},
		{"serve", "-grace", "0s"},
		{"inspect", "only-scope"},
		{"inspect", "anonymous", `"unterminated`},
		{"inspect", "anonymous", "has space"},
		{"sweep", "-batch", "0"},
		{"demo", "-intents", "0"},
		{"demo", "-db", "mysql://x"},
	} {
		var errOut bytes.Buffer
		err := (&Main{Stdout: io.Discard, Stderr: &errOut}).Run(context.Background(), args)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("idem %v: err = %v, want a usage error", args, err)
		}
	}
	for _, cmd := range []string{"serve", "demo", "bench", "sweep", "inspect", "relay", "project", "outbox"} {
		var out, errOut bytes.Buffer
		err := (&Main{Stdout: &out, Stderr: &errOut}).Run(context.Background(), []string{cmd, "-h"})
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Usage: idem "+cmd) || errOut.Len() != 0 {
			t.Errorf("idem %s -h: err = %v, stdout %q, stderr %q; want its usage on stdout", cmd, err, out.String(), errOut.String())
		}
	}
	// A flag error prints the error and the usage on stderr.
	var out, errOut bytes.Buffer
	_ = (&Main{Stdout: &out, Stderr: &errOut}).Run(context.Background(), []string{"sweep", "-nope"})
	if out.Len() != 0 || !strings.Contains(errOut.String(), "-nope") || !strings.Contains(errOut.String(), "Usage: idem sweep") {
		t.Errorf("idem sweep -nope: stdout %q, stderr %q; want the error and usage on stderr", out.String(), errOut.String())
	}
}

// The binary's exit codes: 0 for help, 2 for a usage error.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"help"}, 0},
		{[]string{"serve", "-h"}, 0},
		{[]string{"inspect", "--help"}, 0},
		{[]string{"serve", "-nope"}, 2},
		{[]string{"nope"}, 2},
		{nil, 2},
	} {
		err := exec.Command(binary, tt.args...).Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code {
			t.Errorf("idem %v: exit %d, want %d", tt.args, code, tt.code)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	addr, err := demo.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	for range 300 {
		res, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("server on %s did not become healthy", addr)
}

// Opening a database: errors never print a password, and the commands that
// read records refuse a SQLite path with no file instead of creating one.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	closed := freePort(t) // nothing listens there
	err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(),
		[]string{"sweep", "-db", "postgres://u:s3cret-pw@" + closed + "/test?sslmode=disable&connect_timeout=5"})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "xxxxx") {
		t.Errorf("sweep on an unreachable server: err = %v, want an error with the password hidden", err)
	}
	missing := filepath.Join(t.TempDir(), "typo.db")
	for _, args := range [][]string{{"inspect", "-db", missing, "anonymous", "k"}, {"sweep", "-db", missing}} {
		err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(), args)
		if err == nil || !strings.Contains(err.Error(), "no database") {
			t.Errorf("idem %v: err = %v, want no database", args, err)
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("idem %v created %s (stat: %v)", args, missing, err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable":           "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=qpw&sslmode=disable":      "postgres://u@h/db?password=xxxxx&sslmode=disable",
		"postgresql://h/db?sslpassword=kp&user=u&password=pw": "postgresql://h/db?password=xxxxx&sslpassword=xxxxx&user=u",
		"bank.db": "bank.db",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

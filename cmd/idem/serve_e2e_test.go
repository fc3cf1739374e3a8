package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/sqlitestore"
)

// lockedBuffer collects a child process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// server is an idem serve process started by a test.
type server struct {
	cmd    *exec.Cmd
	addr   string
	stderr *lockedBuffer
	exited chan error
}

// startServe starts idem serve on a free port with args and waits until it
// is healthy. The process is killed at clean-up if still running.
func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	return startServeIn(t, "", args...)
}

// startServeIn is startServe with the process's working directory set to
// dir ("" for the test's own).
func startServeIn(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	return startServeEnv(t, dir, nil, args...)
}

// startServeEnv is startServeIn with env added to the process's
// environment.
func startServeEnv(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	s := &server{addr: freePort(t), stderr: new(lockedBuffer), exited: make(chan error, 1)}
	s.cmd = exec.Command(binary, append([]string{"serve", "-addr", s.addr}, args...)...)
	s.cmd.Dir = dir
	if env != nil {
		s.cmd.Env = append(os.Environ(), env...)
	}
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() { _ = s.cmd.Process.Kill() })
	for range 300 {
		res, err := http.Get("http://" + s.addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return s
			}
		}
		select {
		case err := <-s.exited:
			t.Fatalf("idem serve exited at start: %v\n%s", err, s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("idem serve on %s did not become healthy\n%s", s.addr, s.stderr)
	return nil
}

// stop sends SIGTERM and returns the exit code and how long the exit took.
func (s *server) stop(t *testing.T) (int, time.Duration) {
	t.Helper()
	code, took, err := s.terminate()
	if err != nil {
		t.Fatalf("%v\n%s", err, s.stderr)
	}
	return code, took
}

// terminate is stop for any goroutine: it reports failures as an error.
func (s *server) terminate() (int, time.Duration, error) {
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, 0, err
	}
	select {
	case err := <-s.exited:
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode(), time.Since(start), nil
		}
		return 0, time.Since(start), err
	case <-time.After(60 * time.Second):
		return 0, 0, errors.New("idem serve did not exit within 60s of SIGTERM")
	}
}

func (s *server) do(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+s.addr+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (s *server) accounts(t *testing.T) {
	t.Helper()
	for _, id := range []string{"a", "b"} {
		if status, body := s.do(t, "PUT", "/accounts/"+id, "", `{"balance":1000}`); status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, status, body)
		}
	}
}

func (s *server) transferCount(t *testing.T) int {
	t.Helper()
	status, body := s.do(t, "GET", "/transfers", "", "")
	var l struct{ Count int }
	if status != 200 || json.Unmarshal([]byte(body), &l) != nil {
		t.Fatalf("GET /transfers: %d %s", status, body)
	}
	return l.Count
}

// sendSlowly opens a connection, sends head at once and then body one byte
// every gap, and returns the connection's reader.
func sendSlowly(t *testing.T, addr, head, body string, gap time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := range len(body) {
			time.Sleep(gap)
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	return conn, bufio.NewReader(conn)
}

// A client that sends its body too slowly is answered 408 within
// -body-timeout, as a slow client: not 503, and no error is logged, since
// the store did nothing wrong. (Before, -request-timeout counted the
// upload, and a 33-byte body sent over 11.5 s was a 503 with an ERROR.)
// Defaults throughout: 10 s for the body, 10 s for the work.
func TestServeSlowBodyIs408(t *testing.T) {
	t.Parallel()
	s := startServe(t, "-db", filepath.Join(t.TempDir(), "slow.db"))
	s.accounts(t)
	const body = `{"from":"a","to":"b","amount":500}`
	head := fmt.Sprintf("POST /transfers HTTP/1.1\r\nHost: x\r\nIdempotency-Key: slow\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	start := time.Now()
	conn, r := sendSlowly(t, s.addr, head, body, 350*time.Millisecond) // 12.2 s in all
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	took := time.Since(start)
	if res.StatusCode != http.StatusRequestTimeout {
		t.Errorf("body sent over 12 s: %s after %s, want 408", res.Status, took)
	}
	if took > 12*time.Second {
		t.Errorf("answered after %s, want within the 10 s body timeout", took)
	}
	if log := s.stderr.String(); strings.Contains(log, "level=ERROR") {
		t.Errorf("a slow client was logged as an error:\n%s", log)
	}
	if n := s.transferCount(t); n != 0 {
		t.Errorf("transfers = %d, want 0", n)
	}
}

// Idle keep-alive connections are closed after -idle-timeout.
func TestServeClosesIdleConnections(t *testing.T) {
	t.Parallel()
	s := startServe(t, "-db", filepath.Join(t.TempDir(), "idle.db"), "-idle-timeout", "1s")
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = r.ReadByte()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection after %s: %v, want it closed by the server (EOF)", time.Since(start), err)
	}
	if took := time.Since(start); took < 500*time.Millisecond || took > 10*time.Second {
		t.Errorf("idle connection closed after %s, want about 1s", took)
	}
}

// After SIGTERM, a server whose requests have all been answered exits 0
// within the grace, even when a client is still trickling a body that no
// handler reads: the body's read deadline ends that connection. (Before,
// it kept Shutdown waiting until its deadline, and the process exited 1
// with "context deadline exceeded" though no request was lost.) Defaults
// throughout.
func TestServeExitsZeroWhenNothingWasLost(t *testing.T) {
	t.Parallel()
	s := startServe(t, "-db", filepath.Join(t.TempDir(), "exit.db"))
	s.accounts(t)
	// A first request on the connection shows that the server serves it;
	// the second's headers then reach a server already reading them.
	head := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
	conn, r := sendSlowly(t, s.addr, head, strings.Repeat("x", 1000), 500*time.Millisecond)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if res, err := http.ReadResponse(r, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("first GET /healthz: %v %v", res, err)
	}
	if status, body := s.do(t, "POST", "/transfers", "k", `{"from":"a","to":"b","amount":5}`); status != 201 {
		t.Fatalf("POST /transfers: %d %s", status, body)
	}
	time.Sleep(500 * time.Millisecond)
	code, took := s.stop(t)
	if code != 0 {
		t.Errorf("exit %d after %s, want 0: every request was answered\n%s", code, took, s.stderr)
	}
}

// A request still running when SIGTERM comes is let finish within the
// grace (exit 0); one still running when the grace runs out is cut, and
// the exit status says so (1).
func TestServeGraceOnPostgres(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		grace string
		code  int
	}{{"FinishesWithinGrace", "25s", 0}, {"CutAfterGrace", "1s", 1}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, dsn := pgtest.Schema(t)
			s := startServe(t, "-db", dsn, "-grace", tt.grace, "-request-timeout", "30s")
			s.accounts(t)
			tx := lockRow(t, dsn, "a")
			answer := make(chan int, 1)
			go func() {
				req, _ := http.NewRequest("POST", "http://"+s.addr+"/transfers", strings.NewReader(`{"from":"a","to":"b","amount":5}`))
				// Unique: the records table may be shared (public).
				req.Header.Set("Idempotency-Key", "grace-"+strconv.FormatInt(time.Now().UnixNano(), 36))
				res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
				if err != nil {
					answer <- 0
					return
				}
				res.Body.Close()
				answer <- res.StatusCode
			}()
			time.Sleep(500 * time.Millisecond) // the request waits for the row
			type exit struct {
				code int
				err  error
			}
			stopped := make(chan exit, 1)
			go func() { code, _, err := s.terminate(); stopped <- exit{code, err} }()
			time.Sleep(2 * time.Second)
			_ = tx.Rollback(context.Background())
			if e := <-stopped; e.err != nil || e.code != tt.code {
				t.Errorf("exit %d (%v), want %d\n%s", e.code, e.err, tt.code, s.stderr)
			}
			if tt.code == 1 && !strings.Contains(s.stderr.String(), "still running") {
				t.Errorf("exit 1 without saying why:\n%s", s.stderr)
			}
			if status := <-answer; tt.code == 0 && status != 201 {
				t.Errorf("the running request: %d, want 201", status)
			}
		})
	}
}

func lockRow(t *testing.T, dsn, id string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT FROM accounts WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	return tx
}

// -pool sizes the PostgreSQL pool: the size reaches pgxpool, as its own
// statistics on /metrics and the listening log line show. Without -pool
// the default is 16, and a pool_max_conns in -db is kept; -pool and a
// different pool_max_conns are a usage error.
func TestServePool(t *testing.T) {
	t.Parallel()
	_, dsn := pgtest.Schema(t)
	for _, tt := range []struct {
		name string
		db   string
		args []string
		want string
	}{
		{"Flag", dsn, []string{"-pool", "7"}, "7"},
		{"Default", dsn, nil, "16"},
		{"URL", dsn + "&pool_max_conns=5", nil, "5"},
		{"SameInBoth", dsn + "&pool_max_conns=5", []string{"-pool", "5"}, "5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startServe(t, append([]string{"-db", tt.db}, tt.args...)...)
			status, metrics := s.do(t, "GET", "/metrics", "", "")
			if want := "idem_pgxpool_max_conns " + tt.want + "\n"; status != 200 || !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %q", want)
			}
			if want := "pool=" + tt.want; !strings.Contains(s.stderr.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, s.stderr)
			}
			s.stop(t)
		})
	}
	out, err := exec.Command(binary, "serve", "-addr", freePort(t), "-db", dsn+"&pool_max_conns=5", "-pool", "7").CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "conflicts") {
		t.Errorf("-pool 7 with pool_max_conns=5: %v %s, want exit 2 naming the conflict", err, out)
	}
}

// withSearchPath returns dsn (a URL) with its search_path set to schema.
func withSearchPath(t *testing.T, dsn, schema string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// inspect and sweep never write: on a PostgreSQL schema without a records
// table, or a search_path naming no schema (a typo), they fail with an
// error that says so, and create nothing. (Before, they ran the
// migrations: the schema and the table appeared.)
func TestInspectAndSweepCreateNothingOnPostgres(t *testing.T) {
	t.Parallel()
	schema, dsn := pgtest.Schema(t) // exists, empty
	typo := pgtest.SchemaName(t)    // does not exist
	typoDSN := withSearchPath(t, dsn, typo)
	for _, args := range [][]string{
		{"inspect", "-db", dsn, "anonymous", "k"},
		{"sweep", "-db", dsn},
	} {
		err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(), args)
		if err == nil || !strings.Contains(err.Error(), "no records table") || !strings.Contains(err.Error(), schema) {
			t.Errorf("idem %s on an empty schema: %v, want an error naming the missing table and the schema", args[0], err)
		}
		args[2] = typoDSN
		err = (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(), args)
		if err == nil || !strings.Contains(err.Error(), "search_path") {
			t.Errorf("idem %s with a misspelled search_path: %v, want an error about the search_path", args[0], err)
		}
	}
	if pgtest.SchemaExists(t, typo) {
		t.Errorf("schema %s was created", typo)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("%d tables were created in %s, want none", tables, schema)
	}
}

// The tools never create or migrate a SQLite database: a file that holds
// something else is refused and left as it was.
func TestInspectAndSweepCreateNothingOnSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE notes (body TEXT)`); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"inspect", "-db", path, "anonymous", "k"},
		{"sweep", "-db", path},
	} {
		err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(), args)
		if !errors.Is(err, sqlitestore.ErrSchema) {
			t.Errorf("idem %s on a file without idem's tables: %v, want sqlitestore.ErrSchema", args[0], err)
		}
	}
	var names []string
	rows, err := db.Query(`SELECT name FROM sqlite_master ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if len(names) != 1 || names[0] != "notes" {
		t.Errorf("tables after inspect and sweep: %v, want only notes", names)
	}
}

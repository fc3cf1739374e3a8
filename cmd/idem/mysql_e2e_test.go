package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem/cmd/idem/internal/mysqlurl"
	"github.com/idemkit/idem/internal/mysqltest"
)

// idem serve -db mysql://…: a storm of one key's retries makes one
// transfer, its retry is a replay, and inspect and sweep read the same
// database.
func TestServeOnMySQL(t *testing.T) {
	t.Parallel()
	_, dsn := mysqltest.Database(t)
	db := mysqltest.URL(t, dsn)
	s := startServe(t, "-db", db, "-pool", "8")
	s.accounts(t)
	const storm = 16
	var wg sync.WaitGroup
	statuses := make(chan int, storm)
	for range storm {
		wg.Go(func() {
			status, _ := s.do(t, "POST", "/transfers", "storm-key", `{"from":"a","to":"b","amount":7}`)
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	created := 0
	for st := range statuses {
		switch st {
		case 201:
			created++
		case 409:
		default:
			t.Errorf("a request of the storm was answered %d, want 201 or 409", st)
		}
	}
	if created == 0 {
		t.Errorf("no request of the storm was answered 201")
	}
	if status, body := s.do(t, "POST", "/transfers", "storm-key", `{"from":"a","to":"b","amount":7}`); status != 201 {
		t.Errorf("retry after the storm: %d %s, want the replayed 201", status, body)
	}
	if n := s.transferCount(t); n != 1 {
		t.Errorf("transfers after a storm of one key = %d, want 1", n)
	}
	if status, body := s.do(t, "GET", "/accounts/a", "", ""); status != 200 || !strings.Contains(body, `"balance":993`) {
		t.Errorf("GET /accounts/a = %d %s, want balance 993", status, body)
	}
	if code, _ := s.stop(t); code != 0 {
		t.Errorf("idem serve exited %d\n%s", code, s.stderr)
	}

	var out bytes.Buffer
	if err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{"inspect", "-db", db, "anonymous", "storm-key"}); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if !strings.Contains(out.String(), "completed") {
		t.Errorf("inspect printed %q, want the completed record", out.String())
	}
	out.Reset()
	if err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{"sweep", "-db", db}); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if got := strings.TrimSpace(out.String()); got != "deleted 0 expired record(s)" {
		t.Errorf("sweep printed %q, want nothing deleted (the record is live)", got)
	}
}

// A mysql:// URL's password never shows in an error or a log line.
func TestMySQLPasswordRedacted(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"mysql://u:pw@h:3306/db?tls=false": "mysql://u:xxxxx@h:3306/db?tls=false",
		"mysql://u@h/db":                   "mysql://u@h/db",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
	closed := freePort(t) // nothing listens there
	err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(),
		[]string{"sweep", "-db", "mysql://u:s3cret-pw@" + closed + "/test?timeout=5s"})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "xxxxx") {
		t.Errorf("sweep on an unreachable server: err = %v, want an error with the password hidden", err)
	}
	err = (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(),
		[]string{"sweep", "-db", "mysql://u:s3cret-pw@h:1/test?notADriverParam%=x"})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("sweep with a malformed URL: err = %v, want an error with the password hidden", err)
	}
}

func TestMySQLDSN(t *testing.T) {
	t.Parallel()
	dsn, err := mysqlurl.DSN("mysql://app:p%40ss@db.example:3307/bank?readTimeout=5s&interpolateParams=false")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "p@ss" || cfg.Addr != "db.example:3307" || cfg.DBName != "bank" ||
		cfg.ReadTimeout.Seconds() != 5 || !cfg.ClientFoundRows || cfg.InterpolateParams {
		t.Errorf("mysqlDSN = %+v", cfg)
	}
	if dsn, err := mysqlurl.DSN("mysql://root@127.0.0.1/test"); err != nil || !strings.Contains(dsn, "127.0.0.1:3306") {
		t.Errorf("mysqlDSN without a port = %q, %v; want port 3306", dsn, err)
	}
	for _, bad := range []string{"mysql://root@127.0.0.1:3306", "mysql:///test"} {
		if _, err := mysqlurl.DSN(bad); err == nil {
			t.Errorf("mysqlurl.DSN(%q) = nil error", bad)
		}
	}
}

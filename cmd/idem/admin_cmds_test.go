package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/mysqlurl"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// operatorStore is a store the operators' commands are tested on.
type operatorStore interface {
	idem.LeasedStore
	idem.Inspector
	Close() error
}

// operatorBackends are the -db of the operators' command tests, each with
// its store opened: a SQLite file, a PostgreSQL schema, a MySQL database
// and a private Redis server.
func operatorBackends(t *testing.T) map[string]func(t *testing.T) (string, operatorStore) {
	return map[string]func(t *testing.T) (string, operatorStore){
		"sqlite": func(t *testing.T) (string, operatorStore) {
			db := filepath.Join(t.TempDir(), "ops.db")
			s, err := sqlitestore.Open(context.Background(), db, nil)
			if err != nil {
				t.Fatal(err)
			}
			return db, s
		},
		"postgres": func(t *testing.T) (string, operatorStore) {
			pgtest.Require(t)
			_, dsn := pgtest.Schema(t)
			s, err := pgstore.Open(context.Background(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			return dsn, s
		},
		"mysql": func(t *testing.T) (string, operatorStore) {
			_, dsn := mysqltest.Database(t)
			s, err := mysqlstore.Open(context.Background(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			return mysqltest.URL(t, dsn), s
		},
		"redis": func(t *testing.T) (string, operatorStore) {
			srv := redistest.StartServer(t, redistest.ServerOptions{})
			db := "redis://" + srv.Addr() + "?prefix=ops"
			s, err := openRedis(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			return db, s
		},
	}
}

// seedOperatorRecords writes, at now: a completed record (done-1), an
// expired one (old-1, created two days ago), a pending one whose lease
// ended with a step and a last error (pay-1), and one under a live lease
// (pay-2), all in scope "anonymous".
func seedOperatorRecords(t *testing.T, s idem.LeasedStore, now time.Time) {
	t.Helper()
	ctx := context.Background()
	claim := func(key string, at time.Time, lease time.Duration) idem.Lease {
		c, err := s.Claim(ctx, &idem.ClaimParams{Scope: "anonymous", Key: key, Fingerprint: "fp", Kind: "http:payouts",
			TTL: time.Hour, Now: at, Lease: lease})
		if err != nil || !c.Claimed {
			t.Fatalf("claim %s: %v", key, err)
		}
		return c.Lease
	}
	complete := func(l idem.Lease, at, exp time.Time) {
		if err := s.Complete(ctx, &idem.CompleteParams{Lease: l, Now: at, ExpiresAt: exp,
			Result: idem.Result{Status: 201, Body: []byte(`{"id":1}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	complete(claim("done-1", now, time.Minute), now, now.Add(time.Hour))
	old := now.Add(-48 * time.Hour)
	complete(claim("old-1", old, time.Minute), old, old.Add(time.Hour))
	then := now.Add(-time.Hour)
	l := claim("pay-1", then, time.Minute)
	if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: l, Name: "debit", Output: []byte("42"), Now: then}); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, &idem.ReleaseParams{Lease: l, Now: then, RetryAt: then.Add(time.Minute), Error: "provider: 502"}); err != nil {
		t.Fatal(err)
	}
	claim("pay-2", now, time.Hour)
}

// idemRun runs the idem command line args in process and returns its
// output and error.
func idemRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := (&Main{Stdout: &out, Stderr: &errOut}).Run(context.Background(), args)
	return out.String(), err
}

func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var all []T
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		all = append(all, v)
	}
	return all
}

func keysOf(recs []recordJSON) string {
	var ks []string
	for _, r := range recs {
		ks = append(ks, r.Key+":"+r.State)
	}
	return strings.Join(ks, " ")
}

// TestOperatorCommands runs keys, pending, forget, resolve and keys --audit
// on SQLite, PostgreSQL, MySQL and Redis: listings filter and page, refusals change
// nothing and write no audit row, and every change writes one.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	for name, open := range operatorBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, s := open(t)
			now := time.Now()
			seedOperatorRecords(t, s, now)
			s.Close() // the commands open the database themselves

			for _, tt := range []struct {
				args []string
				want string
			}{
				{nil, "done-1:completed old-1:expired pay-1:pending pay-2:pending"},
				{[]string{"--state", "pending"}, "pay-1:pending pay-2:pending"},
				{[]string{"--state", "expired"}, "old-1:expired"},
				{[]string{"--state", "completed"}, "done-1:completed"},
				{[]string{"--prefix", "pay"}, "pay-1:pending pay-2:pending"},
				{[]string{"--scope", "anonymous", "--prefix", "d"}, "done-1:completed"},
				{[]string{"--scope", "bearer:x"}, ""},
				{[]string{"--older-than", "30m"}, "old-1:expired pay-1:pending"},
				{[]string{"--limit", "3"}, "done-1:completed old-1:expired pay-1:pending"},
			} {
				out, err := idemRun(t, append([]string{"keys", "-db", db, "--json"}, tt.args...)...)
				if err != nil {
					t.Fatalf("keys %v: %v", tt.args, err)
				}
				if got := keysOf(jsonLines[recordJSON](t, out)); got != tt.want {
					t.Errorf("keys %v = %q, want %q", tt.args, got, tt.want)
				}
			}
			if out, err := idemRun(t, "keys", "-db", db); err != nil || !strings.Contains(out, "pay-1") || !strings.Contains(out, "SCOPE") {
				t.Errorf("keys as a table: %v\n%s", err, out)
			}

			out, err := idemRun(t, "pending", "-db", db, "--json")
			if err != nil {
				t.Fatal(err)
			}
			pend := jsonLines[recordJSON](t, out)
			if len(pend) != 2 || pend[0].Key != "pay-1" || !*pend[0].Stuck || *pend[1].Stuck ||
				len(pend[0].Steps) != 1 || pend[0].Steps[0].Name != "debit" || pend[0].LastError != "provider: 502" || pend[0].Attempts != 1 {
				t.Errorf("pending --json = %s, want pay-1 stuck with its step and last error, pay-2 in flight", out)
			}
			out, err = idemRun(t, "pending", "-db", db, "--stuck")
			if err != nil || !strings.Contains(out, "pay-1") || strings.Contains(out, "pay-2") || !strings.Contains(out, "debit") {
				t.Errorf("pending --stuck: %v\n%s; want pay-1 alone, with its step", err, out)
			}

			// Refusals: nothing changes, no audit row.
			for _, tt := range []struct {
				args []string
				want error
			}{
				{[]string{"forget", "-db", db, "anonymous", "pay-1", "--reason", "r"}, idem.ErrPending},
				{[]string{"forget", "-db", db, "anonymous", "pay-2", "--force", "--reason", "r"}, idem.ErrLeaseLive},
				{[]string{"resolve", "-db", db, "anonymous", "pay-2", "--abandon", "--reason", "r"}, idem.ErrLeaseLive},
				{[]string{"resolve", "-db", db, "anonymous", "done-1", "--abandon", "--reason", "r"}, idem.ErrNotPending},
				{[]string{"forget", "-db", db, "anonymous", "none", "--reason", "r"}, idem.ErrNotFound},
			} {
				_, err := idemRun(t, tt.args...)
				if !errors.Is(err, tt.want) || errors.As(err, new(usageError)) {
					t.Errorf("%v: %v, want %v (exit 1)", tt.args, err, tt.want)
				}
			}
			if out, _ := idemRun(t, "keys", "-db", db, "--audit", "--json"); out != "" {
				t.Fatalf("refused changes wrote audit rows:\n%s", out)
			}

			// Changes.
			if out, err := idemRun(t, "forget", "-db", db, "anonymous", "done-1", "--reason", "customer asked to pay again", "--actor", "alice"); err != nil ||
				!strings.Contains(out, "forgot anonymous done-1") {
				t.Fatalf("forget: %v %s", err, out)
			}
			body := filepath.Join(t.TempDir(), "answer.json")
			if err := os.WriteFile(body, []byte(`{"id":7,"state":"settled"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := idemRun(t, "resolve", "-db", db, "anonymous", "pay-1", "--answer", "201", body, "--reason", "provider shows ch_7 settled", "--actor", "bob"); err != nil ||
				!strings.Contains(out, "resolved anonymous pay-1") {
				t.Fatalf("resolve: %v %s", err, out)
			}
			if out, err := idemRun(t, "keys", "-db", db, "--json"); err != nil || keysOf(jsonLines[recordJSON](t, out)) != "old-1:expired pay-1:completed pay-2:pending" {
				t.Errorf("keys after forget and resolve: %v\n%s", err, out)
			}
			s2, _ := reopen(t, name, db)
			rec, err := s2.Lookup(context.Background(), &idem.LookupParams{Scope: "anonymous", Key: "pay-1"})
			if err != nil || rec.Result.Status != 201 || string(rec.Result.Body) != `{"id":7,"state":"settled"}` ||
				rec.Result.Header["Content-Type"][0] != "application/json" || !rec.ExpiresAt.After(now.Add(50*time.Minute)) {
				t.Errorf("resolved record = %+v, %v; want the answer given, kept the record's TTL", rec, err)
			}
			s2.Close()

			out, err = idemRun(t, "keys", "-db", db, "--audit", "--json")
			if err != nil {
				t.Fatal(err)
			}
			audit := jsonLines[auditJSON](t, out)
			if len(audit) != 2 || audit[0].Action != "resolve" || audit[0].Actor != "bob" || audit[0].Status != 201 ||
				audit[0].Before == nil || audit[0].Before.State != "pending" || audit[0].Before.LastError != "provider: 502" ||
				audit[1].Action != "forget" || audit[1].Actor != "alice" || audit[1].Reason != "customer asked to pay again" ||
				audit[1].Before == nil || audit[1].Before.Status != 201 {
				t.Errorf("keys --audit = %s, want the resolve then the forget, with who, why and the records before", out)
			}
			if out, err := idemRun(t, "keys", "-db", db, "--audit", "--limit", "1"); err != nil || !strings.Contains(out, "bob") || strings.Contains(out, "alice") {
				t.Errorf("keys --audit --limit 1: %v\n%s", err, out)
			}
		})
	}
}

func reopen(t *testing.T, backend, db string) (operatorStore, error) {
	t.Helper()
	var (
		s   operatorStore
		err error
	)
	switch backend {
	case "sqlite":
		s, err = sqlitestore.Open(context.Background(), db, &sqlitestore.Config{ReadOnly: true})
	case "redis":
		s, err = openRedis(context.Background(), db)
	case "mysql":
		var dsn string
		if dsn, err = mysqlurl.DSN(db); err == nil {
			s, err = mysqlstore.Open(context.Background(), dsn, nil)
		}
	default:
		s, err = pgstore.Open(context.Background(), db, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, nil
}

// The operators' commands' own usage errors (exit 2).
func TestOperatorUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "--state", "done"}, `keys: --state must be completed, pending or expired, got "done"`},
		{[]string{"keys", "--limit", "-1"}, "keys: --limit must not be negative, got -1"},
		{[]string{"keys", "--older-than", "-1h"}, "keys: --older-than must not be negative, got -1h0m0s"},
		{[]string{"keys", "--audit", "--prefix", "p"}, "keys: --prefix does not apply to --audit"},
		{[]string{"keys", "extra"}, `keys: unexpected argument "extra"`},
		{[]string{"forget", "s"}, "forget: want two arguments, <scope> and <key>"},
		{[]string{"forget", "s", "k"}, "forget: --reason is required"},
		{[]string{"forget", "s", "k", "--reason", "  "}, "forget: --reason is required"},
		{[]string{"forget", "s", "bad key", "--reason", "r"}, "forget: "},
		{[]string{"pending", "x"}, `pending: unexpected argument "x"`},
		{[]string{"pending", "--report-after", "0s"}, "pending: --report-after must be positive"},
		{[]string{"resolve", "s", "k", "--reason", "r"}, "resolve: give --answer STATUS BODYFILE (the answer retries get) or --abandon"},
		{[]string{"resolve", "s", "k", "--abandon", "--answer", "200", "f", "--reason", "r"}, "resolve: give one of --answer STATUS BODYFILE and --abandon, not both"},
		{[]string{"resolve", "s", "k", "--answer", "200", "--reason", "r"}, "resolve: want <scope> <key> and, after --answer STATUS, the body's file"},
		{[]string{"resolve", "s", "k", "--answer", "99", "f", "--reason", "r"}, "resolve: --answer's status must be an HTTP status from 200 to 599, got 99"},
		{[]string{"resolve", "s", "k", "--abandon"}, "resolve: --reason is required"},
		{[]string{"resolve", "s", "k", "x", "--abandon", "--reason", "r"}, "resolve: want two arguments, <scope> and <key>"},
		{[]string{"resolve", "s", "k", "--answer", "200", "/no/such/file", "--reason", "r", "-db", filepath.Join(t.TempDir(), "x.db")}, "resolve: open /no/such/file"},
		{[]string{"serve", "-admin", "127.0.0.1:9090"}, "serve: -admin needs -admin-token"},
		{[]string{"serve", "-admin", "127.0.0.1:9090", "-admin-token", "short"}, "serve: -admin-token must be at least 16 characters"},
		{[]string{"serve", "-admin", "0.0.0.0:9090", "-admin-token", "0123456789abcdef"}, "serve: -admin 0.0.0.0:9090 is not a loopback address"},
		{[]string{"serve", "-admin", ":9090", "-admin-token", "0123456789abcdef"}, "serve: -admin :9090 is not a loopback address"},
		{[]string{"serve", "-admin", "127.0.0.1:9090", "-admin-token", "0123456789abcdef", "-admin-tls-cert", "c"}, "serve: give both -admin-tls-cert and -admin-tls-key"},
		{[]string{"serve", "-admin-token", "0123456789abcdef"}, "serve: -admin-token, -admin-tls-cert and -admin-tls-key apply only with -admin"},
		{[]string{"serve", "-admin", "nope", "-admin-token", "0123456789abcdef"}, `serve: -admin must be host:port, got "nope"`},
	} {
		_, err := idemRun(t, tt.args...)
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want a usage error with %q", tt.args, err, tt.want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/internal/pgtest"
)

// secretToken is a bearer token that the tests look for wherever idem
// serve writes: it must be nowhere.
const secretToken = "sk_live_SECRET123e2e7c1d9a4b"

// idem serve never stores or logs a caller's credential: a payout sent
// with a bearer token, whose provider fails so that the request answers
// 503 and the completer retries it (once in vain, then successfully),
// leaves the token neither in the database (every file of the SQLite
// database; every row of every table of the PostgreSQL schema, bytea
// included) nor in serve's log at debug level. The client's retry with
// the same token and key gets the completer's answer: one token is one
// principal.
func TestServeStoresNoCredential(t *testing.T) {
	t.Parallel()
	for _, d := range []struct {
		name string
		db   func(t *testing.T) (args []string, dump func() []byte)
	}{
		{"SQLite", func(t *testing.T) ([]string, func() []byte) {
			dir := t.TempDir()
			return []string{"-db", filepath.Join(dir, "secret.db")}, func() []byte { return readDir(t, dir) }
		}},
		{"Postgres", func(t *testing.T) ([]string, func() []byte) {
			schema, dsn := pgtest.Schema(t)
			return []string{"-db", dsn}, func() []byte { return dumpSchema(t, dsn, schema) }
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			args, dump := d.db(t)
			prov, url := fakeprovider.Start(t, nil)
			// The request's three calls, and the three of the
			// completer's first attempt.
			for range 6 {
				prov.Inject(fakeprovider.ServerError)
			}
			s := startServe(t, append(args, "-provider", url, "-lease", "2s", "-complete-interval", "300ms", "-log-level", "debug")...)
			if status, body := s.do(t, "PUT", "/accounts/alice", "", `{"balance":1000}`); status != 200 {
				t.Fatalf("PUT /accounts/alice: %d %s", status, body)
			}
			const key = "secret-payout"
			if status, body := postWithToken(t, s, key); status != http.StatusServiceUnavailable {
				t.Fatalf("POST /payouts: %d %s, want 503 (the provider failed)", status, body)
			}
			waitFor(t, "the completer's retry", func() bool {
				log := s.stderr.String()
				return strings.Contains(log, "will retry") && strings.Contains(log, "completer finished abandoned work")
			})
			if l := s.payoutList(t); len(l) != 1 || l[0].State != "completed" || len(prov.Charges()) != 1 {
				t.Fatalf("payouts %+v, charges %+v: want one completed payout, one charge", l, prov.Charges())
			}
			status, body := postWithToken(t, s, key)
			if status != http.StatusCreated || !strings.Contains(body, `"provider_charge_id":"`+prov.Charges()[0].ID+`"`) {
				t.Fatalf("retry with the same token and key: %d %s, want the completer's 201", status, body)
			}
			if code, _ := s.stop(t); code != 0 {
				t.Fatalf("idem serve exited %d\n%s", code, s.stderr)
			}
			assertNoSecret(t, "the database", dump())
			assertNoSecret(t, "the log", []byte(s.stderr.String()))
		})
	}
}

// postWithToken sends the payout with Authorization: Bearer secretToken.
func postWithToken(t *testing.T, s *server, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+s.addr+"/payouts", strings.NewReader(payoutBody()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", "Bearer "+secretToken)
	res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// assertNoSecret fails if b holds the secret part of secretToken, as
// text or as the hex that PostgreSQL prints bytea in.
func assertNoSecret(t *testing.T, where string, b []byte) {
	t.Helper()
	if len(b) == 0 {
		t.Fatalf("%s is empty: nothing was searched", where)
	}
	secret := strings.TrimPrefix(secretToken, "sk_live_")
	for _, form := range []string{secret, hex.EncodeToString([]byte(secret))} {
		if i := bytes.Index(bytes.ToLower(b), bytes.ToLower([]byte(form))); i >= 0 {
			t.Errorf("%s holds the bearer token (%q) at byte %d: …%q…", where, form, i, b[max(0, i-80):min(len(b), i+len(form)+40)])
		}
	}
}

// readDir returns the contents of every file in dir: the SQLite database,
// its WAL and its lock file.
func readDir(t *testing.T, dir string) []byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// dumpSchema returns every row of every table of schema as text.
func dumpSchema(t *testing.T, dsn, schema string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) == 0 {
		t.Fatalf("schema %s has no tables", schema)
	}
	var all []byte
	for _, table := range tables {
		var text string
		q := `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM ` + pgx.Identifier{schema, table}.Sanitize() + ` t`
		if err := conn.QueryRow(ctx, q).Scan(&text); err != nil {
			t.Fatal(err)
		}
		all = append(all, table+":\n"+text+"\n"...)
	}
	return all
}

// Package pgtest is the PostgreSQL plumbing the module's tests share: which
// server they use, what happens when it is missing, and throwaway schemas.
//
// The server is the one at IDEM_PG_DSN, or [DefaultDSN]. When it cannot be
// reached, tests that need it are skipped, except under CI=true, where a
// missing server fails them: CI must never pass by skipping.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/internal/servertest"
)

// DefaultDSN is the server the tests use when IDEM_PG_DSN is not set.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var server = &servertest.Server{
	Name: "PostgreSQL", Env: "IDEM_PG_DSN", Default: DefaultDSN, Hint: "start the server",
	Ping: func(ctx context.Context, dsn string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	},
}

// DSN returns IDEM_PG_DSN, or DefaultDSN when it is not set.
func DSN() string { return server.Addr() }

// Require returns DSN() when the server answers. When it does not, Require
// skips the test, or fails it under CI=true. The server is tried once per
// test binary; every later call gives the same verdict.
func Require(t testing.TB) string {
	t.Helper()
	return server.Require(t)
}

// SchemaName returns a fresh schema name without creating the schema, for
// tests of code that creates it, and drops the schema, if it exists by
// then, at clean-up.
func SchemaName(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "idem_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, DSN())
		if err != nil {
			t.Logf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// Schema calls Require, creates a fresh schema, dropped with everything in
// it at clean-up, and returns its name and a DSN whose connections have it
// as their search_path. Clean-ups registered later run first, so a pool
// opened on the DSN and closed at clean-up is gone before the drop.
//
// With IDEM_PG_BOUNCER set (BouncerEnv), the DSN reaches the server
// through a private PgBouncer in that pool mode (BouncerSchema).
func Schema(t testing.TB) (schema, dsn string) {
	t.Helper()
	if mode := os.Getenv(BouncerEnv); mode != "" {
		return BouncerSchema(t, mode)
	}
	schema = createSchema(t)
	dsn, err := withSettings(DSN(), "search_path", schema)
	if err != nil {
		t.Fatalf("IDEM_PG_DSN: %v", err)
	}
	return schema, dsn
}

// createSchema calls Require and creates a fresh schema, dropped with
// everything in it at clean-up.
func createSchema(t testing.TB) string {
	t.Helper()
	base := Require(t)
	schema := SchemaName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return schema
}

// SchemaExists reports whether the server at DSN() has a schema of that
// name, for tests that check a schema was dropped.
func SchemaExists(t testing.TB, schema string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}

// withSettings returns dsn with settings (keyword, value, keyword, value…)
// set, in either of the forms pgx accepts: a URL, whose query it may or
// may not have (a query's host and port override the URL's), or
// keyword=value pairs (the last of a keyword wins).
func withSettings(dsn string, settings ...string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		for i := 0; i+1 < len(settings); i += 2 {
			dsn += " " + settings[i] + "=" + settings[i+1]
		}
		return strings.TrimSpace(dsn), nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	q := u.Query()
	for i := 0; i+1 < len(settings); i += 2 {
		q.Set(settings[i], settings[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

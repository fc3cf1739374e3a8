package pgtest

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestWithSearchPath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, dsn, want string
	}{
		{"URLWithQuery", "postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?search_path=s&sslmode=disable"},
		{"URLWithoutQuery", "postgres://u@h:5432/db", "postgres://u@h:5432/db?search_path=s"},
		{"URLWithEmptyQuery", "postgresql://u@h/db?", "postgresql://u@h/db?search_path=s"},
		{"URLWithSearchPath", "postgres://u@h/db?search_path=other", "postgres://u@h/db?search_path=s"},
		{"KeywordValue", "host=h dbname=db", "host=h dbname=db search_path=s"},
		{"Empty", "", "search_path=s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withSearchPath(tt.dsn, "s")
			if err != nil || got != tt.want {
				t.Errorf("withSearchPath(%q) = %q, %v; want %q", tt.dsn, got, err, tt.want)
			}
		})
	}
}

// Schema's DSN works in the schema, and the schema is gone after clean-up.
func TestSchema(t *testing.T) {
	t.Parallel()
	Require(t)
	var schema string
	t.Run("Use", func(t *testing.T) {
		var dsn string
		schema, dsn = Schema(t)
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), `CREATE TABLE t (x int)`); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := conn.QueryRow(t.Context(), `SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = 't'::regclass`).Scan(&got); err != nil || got != schema {
			t.Errorf("table t is in schema %q (%v), want %q", got, err, schema)
		}
	})
	if SchemaExists(t, schema) {
		t.Errorf("schema %s still exists after clean-up", schema)
	}
}

// Blackhole forwards, then holds both ways without closing anything, then
// delivers what it held.
func TestBlackhole(t *testing.T) {
	t.Parallel()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	b := NewBlackhole(t, echo.Addr().String())
	c, err := b.Dial(t.Context(), "tcp", "ignored:1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg string) {
		t.Helper()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("echo of %q = %q, %v", msg, got, err)
		}
	}
	roundTrip("before")
	b.Hold()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	// Held: no answer, and no close either (a read times out, it does not
	// end).
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read while held: %d bytes, %v; want a timeout", n, err)
	}
	b.Resume()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after Resume: %q, %v; want the held bytes", got, err)
	}
	roundTrip("after")
}

package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestWithSettings(t *testing.T) {
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
			got, err := withSettings(tt.dsn, "search_path", "s")
			if err != nil || got != tt.want {
				t.Errorf("withSettings(%q, search_path, s) = %q, %v; want %q", tt.dsn, got, err, tt.want)
			}
		})
	}
}

// The host and port that withSettings sets are the ones pgx connects to,
// in either form of DSN: what Proxy relies on.
func TestWithSettingsOverridesTheHost(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://u@db.example:5432/test?sslmode=disable",
		"postgres://u@db.example/test",
		"host=db.example port=5432 dbname=test",
	} {
		got, err := withSettings(dsn, "host", "127.0.0.1", "port", "40123")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgconn.ParseConfig(got)
		if err != nil {
			t.Fatalf("%q: %v", got, err)
		}
		if cfg.Host != "127.0.0.1" || cfg.Port != 40123 || cfg.Database != "test" {
			t.Errorf("%q connects to %s:%d/%s, want 127.0.0.1:40123/test", got, cfg.Host, cfg.Port, cfg.Database)
		}
	}
}

// Proxy's DSN goes through the proxy: its connection is the one Cut
// closes.
func TestProxy(t *testing.T) {
	t.Parallel()
	p, dsn := Proxy(t, Require(t))
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := p.Cut(); n != 1 {
		t.Fatalf("Cut() = %d, want the one connection of the DSN", n)
	}
	if err := conn.Ping(t.Context()); err == nil {
		t.Error("a ping on a cut connection succeeded")
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

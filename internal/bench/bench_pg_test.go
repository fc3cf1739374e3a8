package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgDSN is the PostgreSQL server of the test: IDEM_PG_DSN, or the local
// default.
func pgDSN() string {
	if dsn := os.Getenv("IDEM_PG_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// needPostgres skips the test when the server is unreachable, except
// under CI=true, where it fails.
func needPostgres(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgDSN())
	if err == nil {
		err = conn.Ping(ctx)
		conn.Close(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL at %s is unreachable under CI=true: %v", pgDSN(), err)
		}
		t.Skipf("PostgreSQL at %s is unreachable (set IDEM_PG_DSN, or start the server): %v", pgDSN(), err)
	}
}

// The same run on PostgreSQL, in a fresh schema that is dropped at the end.
// With ReplayProbe, replays and refusals are answered outside the
// transaction: the storm's invariants must hold all the same.
func TestRunPostgres(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	for _, probe := range []bool{false, true} {
		t.Run("ReplayProbe="+strconv.FormatBool(probe), func(t *testing.T) {
			t.Parallel()
			testRunPostgres(t, probe)
		})
	}
}

func testRunPostgres(t *testing.T, probe bool) {
	cfg := tiny(pgDSN())
	cfg.ReplayProbe = probe
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Backend != "postgres" || rep.ReplayProbe != probe {
		t.Errorf("Backend = %q, ReplayProbe = %v; want postgres, %v", rep.Backend, rep.ReplayProbe, probe)
	}
	checkReport(t, rep, cfg)
	for _, c := range rep.Overhead {
		if !c.Bar.Applies {
			t.Errorf("overhead c=%d: the PostgreSQL bar does not apply on PostgreSQL", c.Concurrency)
		}
	}

	// The schema named in the report is gone.
	_, after, ok := strings.Cut(rep.Database, "(schema ")
	schema, _, _ := strings.Cut(after, ",")
	if !ok || !strings.HasPrefix(schema, "idem_bench_") {
		t.Fatalf("Database = %q names no schema", rep.Database)
	}
	conn, err := pgx.Connect(t.Context(), pgDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("schema %s still exists after the run", schema)
	}
}

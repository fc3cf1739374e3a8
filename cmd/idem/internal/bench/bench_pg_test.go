package bench

import (
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idem/internal/pgtest"
)

// The same run on PostgreSQL, in a fresh schema that is dropped at the end.
// With ReplayProbe, replays and refusals are answered outside the
// transaction: the storm's invariants must hold all the same.
func TestRunPostgres(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	for _, probe := range []bool{false, true} {
		t.Run("ReplayProbe="+strconv.FormatBool(probe), func(t *testing.T) {
			t.Parallel()
			testRunPostgres(t, probe)
		})
	}
}

func testRunPostgres(t *testing.T, probe bool) {
	cfg := tiny(pgtest.DSN())
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
		if got, want := c.Bar.Applies, c.Concurrency >= 8; got != want {
			t.Errorf("overhead c=%d: the PostgreSQL bar applies=%v, want %v (it is set at 8 and 32 clients)", c.Concurrency, got, want)
		}
	}
	if rep.StormTwo == nil {
		t.Error("no storm over two instances on PostgreSQL")
	}

	// The schema named in the report is gone.
	_, after, ok := strings.Cut(rep.Database, "(schema ")
	schema, _, _ := strings.Cut(after, ",")
	if !ok || !strings.HasPrefix(schema, "idem_bench_") {
		t.Fatalf("Database = %q names no schema", rep.Database)
	}
	if pgtest.SchemaExists(t, schema) {
		t.Errorf("schema %s still exists after the run", schema)
	}
}

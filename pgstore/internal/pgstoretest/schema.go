package pgstoretest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// K2 and E1 across services: two servers whose connections have the
// search paths "x, public" and "y, public" keep different ledgers, in x
// and y. With no Config.Schema, each store's records live beside its own
// ledger (the connection's current_schema()), never in a table the two
// share: the second server runs a request the first ran, it never answers
// it with the first one's replay.
func testSchemaIsTheConnectionsCurrentSchema(t *testing.T, d Driver) {
	pgtest.Require(t)
	ctx := context.Background()
	// A table name of the test's own, so that a store that put its
	// records in public would touch nothing else there.
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := "idem_records_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { dropFromPublic(t, table) })

	req := idem.Request{Scope: "alice", Key: "transfer-1", Fingerprint: "fp"}
	ledgers := []string{"x", "y"}
	var (
		envs    []*Env
		schemas []string
	)
	for range ledgers {
		schema, _ := pgtest.Schema(t)
		e := open(t, d, Conn{SearchPath: schema + ", public"}, Config{Table: table})
		mustExec(t, e, `CREATE TABLE effects (name text NOT NULL)`)
		envs, schemas = append(envs, e), append(schemas, schema)
	}
	for i, ledger := range ledgers {
		_, replayed, err := newGuard(t, envs[i].Store, nil).Do(ctx, req, effect(d, ledger, idem.Result{Status: 201, Body: []byte(ledger)}))
		if err != nil || replayed {
			t.Fatalf("server %s: replayed=%v err=%v, want its own execution", ledger, replayed, err)
		}
	}
	for i, ledger := range ledgers {
		if n := count(t, envs[i], `SELECT count(*) FROM effects WHERE name = $1`, ledger); n != 1 {
			t.Errorf("server %s: %d effects in its ledger, want 1", ledger, n)
		}
		if n := count(t, envs[i], `SELECT count(*) FROM `+pgx.Identifier{schemas[i], table}.Sanitize()); n != 1 {
			t.Errorf("server %s: %d records in its schema %s, want 1", ledger, n, schemas[i])
		}
	}
	if n := count(t, envs[0], `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = $1`, table); n != 0 {
		t.Errorf("the records table was created in public")
	}

	// A search_path that names no existing schema is refused, and says so.
	_, err := d.Open(ctx, t, Conn{SearchPath: pgtest.SchemaName(t), MaxConns: 1}, Config{Table: table})
	if err == nil || !strings.Contains(err.Error(), "search_path") || !strings.Contains(err.Error(), "Config.Schema") {
		t.Errorf("Open on a search_path without a schema: %v, want an error naming search_path and Config.Schema", err)
	}
}

// dropFromPublic drops what a store that put its records in public would
// have left there.
func dropFromPublic(t *testing.T, table string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.DSN())
	if err != nil {
		t.Logf("drop %s: %v", table, err)
		return
	}
	defer conn.Close(ctx)
	for _, name := range []string{table, table + "_migrations", table + "_steps"} {
		if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{"public", name}.Sanitize()); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	}
}

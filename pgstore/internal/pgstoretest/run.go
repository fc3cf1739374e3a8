package pgstoretest

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
)

// tests are the cases Run runs, each a subtest of that name.
var tests = []struct {
	name string
	run  func(t *testing.T, d Driver)
}{
	{"ConfigValidate", testConfigValidate},
	{"QuotedIdentifiers", testQuotedIdentifiers},
	{"MigrateConcurrently", testMigrateConcurrently},
	{"SchemaIsTheConnectionsCurrentSchema", testSchemaIsTheConnectionsCurrentSchema},
	{"BeginIsReadCommittedWhateverTheDefault", testBeginIsReadCommitted},
	{"HashCollisionOnlyCostsInFlight", testHashCollisionOnlyCostsInFlight},
	{"TxOutlivesTheCallersContext", testTxOutlivesTheCallersContext},
	{"WorkThatEndsTheTransactionRecordsNothing", testWorkThatEndsTheTransaction},
	{"Transient", testTransient},
	{"UnreachableServerIsUnavailable", testUnreachableServer},
	{"PoolExhaustedIsUnavailable", testPoolExhausted},
	{"StarvedPoolStillAnswersReplaysAndRefusals", testStarvedPool},
	{"RoundTrips", testRoundTrips},
	{"IdleTimeoutIsTheTransactions", testIdleTimeoutIsTheTransactions},
	{"AbandonedTransactionFreesKey", testAbandonedTransactionFreesKey},
	{"VanishedHostFreesKeyWithinTheBound", testVanishedHost},
	{"SlowWorkPastTheBoundRollsBack", testSlowWorkPastTheBound},
	{"TerminatedBackendsUnderLoad", testTerminatedBackendsUnderLoad},
	{"ClusterRestartUnderLoad", testClusterRestartUnderLoad},
}

// Run runs every shared test against the store d opens, in parallel
// subtests.
func Run(t *testing.T, d Driver) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, d)
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// open opens a store, failing the test if it cannot.
func open(t testing.TB, d Driver, c Conn, cfg Config) *Env {
	t.Helper()
	e, err := d.Open(context.Background(), t, c, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return e
}

// setup opens a store on 8 connections in a fresh schema, which is their
// search_path and the store's Schema, and creates an effects table there.
func setup(t *testing.T, d Driver, cfg Config) (*Env, string) {
	t.Helper()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	if cfg.Schema == "" {
		cfg.Schema = schema
	}
	e := open(t, d, Conn{SearchPath: schema}, cfg)
	mustExec(t, e, `CREATE TABLE effects (name text NOT NULL)`)
	return e, schema
}

func mustExec(t testing.TB, e *Env, sql string, args ...any) {
	t.Helper()
	if err := e.DB.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t testing.TB, e *Env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.DB.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// newGuard returns a Guard over s with the in-process shortcuts off (the
// replay cache and the local in-flight refusal), so that every call
// reaches the store these tests are about.
func newGuard(t testing.TB, s idem.Store, cfg *idem.Config) *idem.Guard {
	t.Helper()
	var c idem.Config
	if cfg != nil {
		c = *cfg
	}
	c.ReplayCacheBytes, c.DisableLocalInFlight = -1, true
	g, err := idem.New(s, &c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// effect is a work that inserts name into effects, in the work's
// transaction, and answers res.
func effect(d Driver, name string, res idem.Result) idem.Work {
	return func(ctx context.Context) (idem.Result, error) {
		return res, execIn(ctx, d, nil, `INSERT INTO effects (name) VALUES ($1)`, name)
	}
}

func record(scope, key string, now time.Time, ttl time.Duration) *idem.Record {
	return &idem.Record{Scope: scope, Key: key, Fingerprint: "fp", State: idem.StateCompleted,
		Result: idem.Result{Status: 201, Body: []byte(key)}, CreatedAt: now, ExpiresAt: now.Add(ttl)}
}

package sqldb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/idemkit/idem/pgstore/sqldb"
	"github.com/jackc/pgx/v5/pgxpool"
)

// twoStores are a pgstore and a sqldb store on one table, each with a
// Guard on a clock stopped at t0, and the pgx pool.
type twoStores struct {
	pg      *pgstore.Store
	sq      *sqldb.Store
	pgGuard *idem.Guard
	sqGuard *idem.Guard
	pool    *pgxpool.Pool
}

// setupTwo returns both stores on a table in a fresh schema that holds an
// effects table too. sqldbFirst says which store creates the table.
func setupTwo(t *testing.T, sqldbFirst bool, probe bool) *twoStores {
	t.Helper()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	ctx := context.Background()
	pool := newPool(t, schema)
	db := newDB(t, dbOptions{schema: schema, maxConns: 4})
	pgCfg := pgstore.Config{Schema: schema, Table: "shared_records", ReplayProbe: probe}
	sqCfg := sqldb.Config{Schema: schema, Table: "shared_records", ReplayProbe: probe}
	e := &twoStores{pool: pool}
	var err error
	if sqldbFirst {
		if e.sq, err = sqldb.New(ctx, db, &sqCfg); err == nil {
			e.pg, err = pgstore.New(ctx, pool, &pgCfg)
		}
	} else {
		if e.pg, err = pgstore.New(ctx, pool, &pgCfg); err == nil {
			e.sq, err = sqldb.New(ctx, db, &sqCfg)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return t0 }
	e.pgGuard, _ = idem.New(e.pg, &idem.Config{Now: clock, TTL: time.Hour})
	e.sqGuard, _ = idem.New(e.sq, &idem.Config{Now: clock, TTL: time.Hour})
	return e
}

func (e *twoStores) pgWork(name string, res idem.Result) idem.Work {
	return func(ctx context.Context) (idem.Result, error) {
		tx, _ := pgstore.TxFrom(ctx)
		_, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
		return res, err
	}
}

func (e *twoStores) sqWork(name string, res idem.Result) idem.Work {
	return func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqldb.TxFrom(ctx)
		_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ($1)`, name)
		return res, err
	}
}

func (e *twoStores) effects(t *testing.T, name string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE name = $1`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestInterop(t *testing.T) {
	// pgstore and sqldb on one table are one store: each replays the
	// other's records byte for byte (E4) and rejects a mismatch (E5), each
	// refuses a key the other holds in flight (E3: the same lock key), the
	// expired records of one are replaced by the other (E7), and the
	// migrations are applied once, whichever store comes first.
	t.Parallel()
	pgtest.Require(t)
	for _, sqldbFirst := range []bool{false, true} {
		for _, probe := range []bool{false, true} {
			t.Run(fmt.Sprintf("SqldbFirst=%v/ReplayProbe=%v", sqldbFirst, probe), func(t *testing.T) {
				t.Parallel()
				e := setupTwo(t, sqldbFirst, probe)
				ctx := context.Background()
				var n int
				if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM shared_records_migrations`).Scan(&n); err != nil || n != pgschema.LatestVersion() {
					t.Errorf("migration rows = %d, %v; want %d", n, err, pgschema.LatestVersion())
				}
				want := idem.Result{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}, "X-Multi": {"a", "b"}}, Body: []byte{0, 1, 2, 0xff, '{', '}'}}

				t.Run("PgstoreToSqldb", func(t *testing.T) {
					req := idem.Request{Scope: "alice", Key: "pg-first", Fingerprint: "fp"}
					if _, replayed, err := e.pgGuard.Do(ctx, req, e.pgWork("pg-first", want)); err != nil || replayed {
						t.Fatalf("pgstore: replayed=%v err=%v", replayed, err)
					}
					got, replayed, err := e.sqGuard.Do(ctx, req, e.sqWork("pg-first", idem.Result{Status: 500}))
					if err != nil || !replayed {
						t.Fatalf("sqldb after pgstore: replayed=%v err=%v, want a replay", replayed, err)
					}
					assertResult(t, got, want)
					req.Fingerprint = "other"
					if _, _, err := e.sqGuard.Do(ctx, req, e.sqWork("pg-first", want)); !errors.Is(err, idem.ErrMismatch) {
						t.Errorf("sqldb with another fingerprint: %v, want ErrMismatch", err)
					}
					if n := e.effects(t, "pg-first"); n != 1 {
						t.Errorf("effects = %d, want 1", n)
					}
				})

				t.Run("SqldbToPgstore", func(t *testing.T) {
					req := idem.Request{Scope: "alice", Key: "sq-first", Fingerprint: "fp"}
					if _, replayed, err := e.sqGuard.Do(ctx, req, e.sqWork("sq-first", want)); err != nil || replayed {
						t.Fatalf("sqldb: replayed=%v err=%v", replayed, err)
					}
					got, replayed, err := e.pgGuard.Do(ctx, req, e.pgWork("sq-first", idem.Result{Status: 500}))
					if err != nil || !replayed {
						t.Fatalf("pgstore after sqldb: replayed=%v err=%v, want a replay", replayed, err)
					}
					assertResult(t, got, want)
					rec, err := e.pg.Lookup(ctx, &idem.LookupParams{Scope: "alice", Key: "sq-first"})
					if err != nil || !rec.CreatedAt.Equal(t0) || !rec.ExpiresAt.Equal(t0.Add(time.Hour)) || rec.State != idem.StateCompleted {
						t.Errorf("pgstore Lookup of sqldb's record = %+v, %v", rec, err)
					}
					if n := e.effects(t, "sq-first"); n != 1 {
						t.Errorf("effects = %d, want 1", n)
					}
				})

				t.Run("InFlightAcrossStores", func(t *testing.T) {
					p := &idem.BeginParams{Scope: "alice", Key: "held", Now: t0}
					_, pgTx, err := e.pg.Begin(ctx, p)
					if err != nil || pgTx == nil {
						t.Fatalf("pgstore Begin: tx=%v err=%v", pgTx, err)
					}
					if _, tx, err := e.sq.Begin(ctx, p); !errors.Is(err, idem.ErrInFlight) {
						if tx != nil {
							_ = tx.Rollback(ctx)
						}
						t.Errorf("sqldb Begin while pgstore holds the key: %v, want ErrInFlight", err)
					}
					_ = pgTx.Rollback(ctx)
					_, sqTx, err := e.sq.Begin(ctx, p)
					if err != nil || sqTx == nil {
						t.Fatalf("sqldb Begin after pgstore rolled back: tx=%v err=%v", sqTx, err)
					}
					if _, tx, err := e.pg.Begin(ctx, p); !errors.Is(err, idem.ErrInFlight) {
						if tx != nil {
							_ = tx.Rollback(ctx)
						}
						t.Errorf("pgstore Begin while sqldb holds the key: %v, want ErrInFlight", err)
					}
					// The holder commits; the other store replays it.
					if err := sqTx.Commit(ctx, &idem.CommitParams{Record: record("alice", "held", t0, time.Hour), Now: t0}); err != nil {
						t.Fatal(err)
					}
					if rec, tx, err := e.pg.Begin(ctx, p); err != nil || rec == nil || tx != nil || string(rec.Result.Body) != "held" {
						t.Errorf("pgstore Begin after sqldb committed: rec=%+v tx=%v err=%v, want the record", rec, tx, err)
					}
				})

				t.Run("ExpiredRecordReplacedAcrossStores", func(t *testing.T) {
					req := idem.Request{Scope: "bob", Key: "expires", Fingerprint: "fp"}
					if _, _, err := e.pgGuard.Do(ctx, req, e.pgWork("expires", idem.Result{Status: 201, Body: []byte("one")})); err != nil {
						t.Fatal(err)
					}
					// Only this subtest's key is on the clock's path:
					// the other subtests ran before and are done.
					later := t0.Add(time.Hour)
					rec, tx, err := e.sq.Begin(ctx, &idem.BeginParams{Scope: "bob", Key: "expires", Now: later})
					if err != nil || rec != nil {
						t.Fatalf("sqldb Begin at expiry: rec=%v err=%v, want a new execution", rec, err)
					}
					r := record("bob", "expires", later, time.Hour)
					r.Result.Body = []byte("two")
					if err := tx.Commit(ctx, &idem.CommitParams{Record: r, Now: later}); err != nil {
						t.Fatalf("sqldb replacing pgstore's expired record: %v", err)
					}
					got, err := e.pg.Lookup(ctx, &idem.LookupParams{Scope: "bob", Key: "expires"})
					if err != nil || string(got.Result.Body) != "two" {
						t.Errorf("pgstore Lookup = %+v, %v; want sqldb's new record", got, err)
					}
				})
			})
		}
	}
}

func assertResult(t *testing.T, got, want idem.Result) {
	t.Helper()
	if got.Status != want.Status || string(got.Body) != string(want.Body) || fmt.Sprint(got.Header) != fmt.Sprint(want.Header) {
		t.Errorf("result = %d %v %q, want %d %v %q", got.Status, got.Header, got.Body, want.Status, want.Header, want.Body)
	}
}

func record(scope, key string, now time.Time, ttl time.Duration) *idem.Record {
	return &idem.Record{Scope: scope, Key: key, Fingerprint: "fp", State: idem.StateCompleted,
		Result: idem.Result{Status: 201, Body: []byte(key)}, CreatedAt: now, ExpiresAt: now.Add(ttl)}
}

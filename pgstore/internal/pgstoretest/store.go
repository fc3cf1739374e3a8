package pgstoretest

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func testConfigValidate(t *testing.T, d Driver) {
	if _, err := d.Open(context.Background(), t, Conn{Nil: true}, Config{}); err == nil {
		t.Error("New with a nil pool succeeded")
	}
	// Validation comes before any database access: on a server that
	// cannot be reached, a bad field is named, not the network.
	for _, tt := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"LongSchema", Config{Schema: strings.Repeat("s", 64)}, "Config.Schema"},
		{"LongTable", Config{Table: strings.Repeat("t", 49)}, "Config.Table"},
		{"NulTable", Config{Table: "a\x00b"}, "Config.Table"},
		{"BadUTF8", Config{Schema: "\xff"}, "Config.Schema"},
		{"LongIdleTimeout", Config{IdleInTransactionTimeout: 25 * 24 * time.Hour}, "Config.IdleInTransactionTimeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.Open(context.Background(), t, Conn{DSN: "postgres://127.0.0.1:1/none?connect_timeout=1"}, tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Open: %v, want an error naming %s", err, tt.field)
			}
		})
	}
	// What is valid opens, the zero Config included (SkipMigrate keeps
	// the odd names out of the database).
	pgtest.Require(t)
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"Zero", Config{}},
		{"Quoted", Config{Schema: `we"ird schema`, Table: `Tab; DROP TABLE x`, SkipMigrate: true}},
		{"LongestTable", Config{Table: strings.Repeat("t", 48), SkipMigrate: true}},
		{"NoIdleTimeout", Config{IdleInTransactionTimeout: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			schema, _ := pgtest.Schema(t)
			if _, err := d.Open(context.Background(), t, Conn{SearchPath: schema, MaxConns: 2}, tt.cfg); err != nil {
				t.Errorf("Open: %v, want nil", err)
			}
		})
	}
}

func testQuotedIdentifiers(t *testing.T, d Driver) {
	// Identifiers are always quoted: names that need quoting, or that
	// would inject SQL unquoted, work as plain names.
	const name = `Rec"ords; DROP TABLE effects --`
	e, schema := setup(t, d, Config{Table: name})
	g := newGuard(t, e.Store, &idem.Config{Now: func() time.Time { return t0 }})
	for i := range 2 {
		res, replayed, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 201, Body: []byte("ok")}, nil
		})
		if err != nil || replayed != (i == 1) || string(res.Body) != "ok" {
			t.Fatalf("Do %d: body=%q replayed=%v err=%v", i, res.Body, replayed, err)
		}
	}
	table := pgx.Identifier{schema, name}.Sanitize()
	if n := count(t, e, `SELECT count(*) FROM `+table); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
	// A conflict on this table is still recognised as one: the server
	// names it unquoted, as Config does.
	ctx := context.Background()
	_, tx, err := e.Store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k2", Now: t0})
	if err != nil || tx == nil {
		t.Fatalf("Begin: tx=%v err=%v", tx, err)
	}
	mustExec(t, e, `INSERT INTO `+table+` (scope, key, fingerprint, state, status, body, created_at, expires_at) VALUES ('s', 'k2', 'fp', 'completed', 200, '', $1, $2)`, t0, t0.Add(time.Hour))
	if err := tx.Commit(ctx, &idem.CommitParams{Record: record("s", "k2", t0, time.Hour), Now: t0}); !errors.Is(err, idem.ErrConflict) {
		t.Errorf("Commit behind a live record: %v, want ErrConflict", err)
	}
}

func testMigrateConcurrently(t *testing.T, d Driver) {
	// Several processes starting at once (here: pools, each with its own
	// connections) apply the migrations exactly once, without errors.
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			_, err := d.Open(context.Background(), t, Conn{MaxConns: 2}, Config{Schema: schema})
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Open: %v", err)
		}
	}
	e := open(t, d, Conn{SearchPath: schema, MaxConns: 2}, Config{Schema: schema, SkipMigrate: true})
	if got, want := count(t, e, `SELECT count(*) FROM idem_records_migrations`), pgschema.LatestVersion(); got != want {
		t.Errorf("migration rows = %d, want %d", got, want)
	}
	m, ok := e.Store.(interface{ Migrate(context.Context) error })
	if !ok {
		t.Fatalf("%T has no Migrate", e.Store)
	}
	if err := m.Migrate(context.Background()); err != nil {
		t.Errorf("Migrate again: %v", err)
	}
}

func testBeginIsReadCommitted(t *testing.T, d Driver) {
	// The read after the lock needs a snapshot of its own, which only READ
	// COMMITTED gives (docs/DESIGN.md, pitfall "snapshot before lock").
	// Begin sets it explicitly, so a connection whose default is
	// REPEATABLE READ still runs the work in READ COMMITTED.
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	e := open(t, d, Conn{SearchPath: schema, MaxConns: 2, Runtime: map[string]string{"default_transaction_isolation": "repeatable read"}}, Config{Schema: schema})
	var def string
	if err := e.DB.QueryRow(context.Background(), `SHOW default_transaction_isolation`).Scan(&def); err != nil || def != "repeatable read" {
		t.Fatalf("default_transaction_isolation = %q, %v; the test needs repeatable read", def, err)
	}
	g := newGuard(t, e.Store, nil)
	var got string
	_, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		return idem.Result{Status: 200}, queryRow(ctx, d, nil, `SHOW transaction_isolation`).Scan(&got)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != "read committed" {
		t.Errorf("transaction_isolation in the work = %q, want %q", got, "read committed")
	}
}

func testHashCollisionOnlyCostsInFlight(t *testing.T, d Driver) {
	// The pitfall "lock by hash, decide by hash" (docs/DESIGN.md): with
	// every key hashing to one lock, a second key is refused while the
	// first is held, and once free it runs its own work: never answered
	// with the other key's record.
	e, _ := setup(t, d, Config{})
	s := e.Store
	d.SetLockKey(s, func(string, string) int64 { return 7 })
	ctx := context.Background()
	_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "a", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "b", Now: t0}); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("Begin(b) while a holds the shared lock: %v, want ErrInFlight", err)
	}
	if err := tx.Commit(ctx, &idem.CommitParams{Record: record("s", "a", t0, time.Hour), Now: t0}); err != nil {
		t.Fatal(err)
	}
	rec, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "b", Now: t0})
	if err != nil || rec != nil || tx == nil {
		t.Fatalf("Begin(b) after a committed: rec=%v tx=%v err=%v, want an open tx", rec, tx, err)
	}
	_ = tx.Rollback(ctx)
}

func testTxOutlivesTheCallersContext(t *testing.T, d Driver) {
	// The Guard commits a work that succeeded even when the caller's ctx
	// ended meanwhile. The transaction must not end with ctx (database/sql
	// would roll it back on its own): ended ctx or not, the Tx commits
	// the effect with its record.
	e, _ := setup(t, d, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	_, tx, err := e.Store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if err := execIn(ctx, d, tx, `INSERT INTO effects (name) VALUES ('late')`); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := execIn(context.Background(), d, tx, `INSERT INTO effects (name) VALUES ('later')`); err != nil {
		t.Fatalf("the transaction after its caller's ctx ended: %v", err)
	}
	if err := tx.Commit(context.Background(), &idem.CommitParams{Record: record("s", "k", t0, time.Hour), Now: t0}); err != nil {
		t.Fatalf("Commit after the caller's ctx ended: %v", err)
	}
	if n := count(t, e, `SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("effects = %d, want 2", n)
	}
}

func testWorkThatEndsTheTransaction(t *testing.T, d Driver) {
	// E1: a work that ends the transaction itself (an Exec of ROLLBACK or
	// COMMIT, which the driver does not see) and returns success must not
	// get its record committed alone: nothing is recorded, the error says
	// that a retry will not cure it, and the retry runs.
	for _, stmt := range []string{"ROLLBACK", "COMMIT", "ROLLBACK; BEGIN", "COMMIT; BEGIN"} {
		t.Run(stmt, func(t *testing.T) {
			t.Parallel()
			e, _ := setup(t, d, Config{})
			ctx := context.Background()
			g := newGuard(t, e.Store, nil)
			req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
			_, _, err := g.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
				if err := execIn(ctx, d, nil, `INSERT INTO effects (name) VALUES ('e')`); err != nil {
					return idem.Result{}, err
				}
				return idem.Result{Status: 201}, execIn(ctx, d, nil, stmt)
			})
			if err == nil || d.Transient(err) {
				t.Fatalf("Do: %v, want a permanent error", err)
			}
			if n := count(t, e, `SELECT count(*) FROM idem_records`); n != 0 {
				t.Errorf("records = %d, want 0", n)
			}
			if _, replayed, err := g.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
				return idem.Result{Status: 201}, nil
			}); err != nil || replayed {
				t.Errorf("retry: replayed=%v err=%v, want a fresh run", replayed, err)
			}
		})
	}
}

// sqlStateError has the shape of lib/pq's *pq.Error: a pointer whose
// SQLState method returns the code.
type sqlStateError struct{ code string }

func (e *sqlStateError) Error() string    { return "pq: something (" + e.code + ")" }
func (e *sqlStateError) SQLState() string { return e.code }

func testTransient(t *testing.T, d Driver) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"Serialization", &pgconn.PgError{Code: "40001"}, true},
		{"Deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"ConnectionFailure", &pgconn.PgError{Code: "08006"}, true},
		{"TooManyConnections", &pgconn.PgError{Code: "53300"}, true},
		{"IdleInTransactionTimeout", &pgconn.PgError{Code: "25P03"}, true},
		{"UndefinedTable", &pgconn.PgError{Code: "42P01"}, false},
		{"InsufficientPrivilege", &pgconn.PgError{Code: "42501"}, false},
		{"WrappedStartingUp", fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "57P03"}), true},
		{"PqTooManyConnections", &sqlStateError{"53300"}, true},
		{"PqInsufficientPrivilege", &sqlStateError{"42501"}, false},
		{"WrappedPq", fmt.Errorf("wrapped: %w", &sqlStateError{"57P03"}), true},
		{"BadConn", driver.ErrBadConn, true},
		{"Deadline", context.DeadlineExceeded, true},
		{"Network", &net.OpError{Op: "read", Err: errors.New("connection reset")}, true},
		{"Nil", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.Transient(tt.err); got != tt.want {
				t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func testUnreachableServer(t *testing.T, d Driver) {
	// E8: a server that cannot be reached fails closed, in Open (which
	// reads the schema and migrates) and in Begin, with a transient
	// ErrUnavailable that keeps the network error.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c := Conn{DSN: "postgres://postgres@" + addr + "/test?sslmode=disable&connect_timeout=2"}
	_, err = d.Open(ctx, t, c, Config{})
	if !errors.Is(err, idem.ErrUnavailable) || !d.Transient(err) {
		t.Fatalf("Open: %v, want a transient ErrUnavailable", err)
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Errorf("Open: %v does not unwrap to *pgconn.ConnectError", err)
	}
	e, err := d.Open(ctx, t, c, Config{Schema: "s", SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0}); !errors.Is(err, idem.ErrUnavailable) || !d.Transient(err) {
		t.Errorf("Begin: %v, want a transient ErrUnavailable", err)
	}
}

func testPoolExhausted(t *testing.T, d Driver) {
	// E8: when no connection can be had before ctx's deadline, Begin of a
	// free key fails with a transient ErrUnavailable that says so,
	// instead of hanging.
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	e := open(t, d, Conn{SearchPath: schema, MaxConns: 1}, Config{Schema: schema})
	// A first Begin, so that the one-time connection check is done and
	// the deadline below meets the wait for a connection.
	if _, tx, err := e.Store.Begin(context.Background(), &idem.BeginParams{Scope: "s", Key: "warm", Now: t0}); err != nil {
		t.Fatal(err)
	} else {
		_ = tx.Rollback(context.Background())
	}
	release, err := e.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = e.Store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0})
	if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !d.Transient(err) {
		t.Errorf("Begin on an exhausted pool: %v, want a transient ErrUnavailable wrapping DeadlineExceeded", err)
	}
	release()
	if _, tx, err := e.Store.Begin(context.Background(), &idem.BeginParams{Scope: "s", Key: "k", Now: t0}); err != nil {
		t.Errorf("Begin after release: %v", err)
	} else {
		_ = tx.Rollback(context.Background())
	}
}

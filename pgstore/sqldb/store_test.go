package sqldb_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// setup returns a store in a fresh schema, its database handle (whose
// search_path is that schema, holding an effects table) and the schema's
// name.
func setup(t *testing.T, cfg *pgstore.Config) (*sqldb.Store, *sql.DB, string) {
	t.Helper()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	db := newDB(t, dbOptions{schema: schema, maxConns: 8})
	var c pgstore.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Schema == "" {
		c.Schema = schema
	}
	s, err := sqldb.New(context.Background(), db, &c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := db.Exec(`CREATE TABLE ` + pgx.Identifier{schema, "effects"}.Sanitize() + ` (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s, db, schema
}

func countRows(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func record(scope, key string, now time.Time, ttl time.Duration) *idem.Record {
	return &idem.Record{Scope: scope, Key: key, Fingerprint: "fp", State: idem.StateCompleted,
		Result: idem.Result{Status: 201, Body: []byte(key)}, CreatedAt: now, ExpiresAt: now.Add(ttl)}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := sqldb.New(context.Background(), nil, nil); err == nil {
		t.Error("New(nil db) succeeded")
	}
	tests := []struct {
		name  string
		cfg   *pgstore.Config
		field string // "" = valid
	}{
		{"Nil", nil, ""},
		{"Zero", &pgstore.Config{}, ""},
		{"Quoted", &pgstore.Config{Schema: `we"ird schema`, Table: `Tab; DROP TABLE x`}, ""},
		{"LongSchema", &pgstore.Config{Schema: strings.Repeat("s", 64)}, "Config.Schema"},
		{"LongTable", &pgstore.Config{Table: strings.Repeat("t", 49)}, "Config.Table"},
		{"NulTable", &pgstore.Config{Table: "a\x00b"}, "Config.Table"},
	}
	// sql.Open connects lazily, and SkipMigrate keeps New from the
	// database: validation comes first.
	db, err := sql.Open("pgx", "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg pgstore.Config
			if tt.cfg != nil {
				cfg = *tt.cfg
			}
			cfg.SkipMigrate = true
			_, err := sqldb.New(context.Background(), db, &cfg)
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("New: %v, want nil", err)
			case tt.field != "" && (err == nil || !strings.Contains(err.Error(), tt.field)):
				t.Errorf("New: %v, want an error naming %s", err, tt.field)
			}
		})
	}
}

func TestQuotedIdentifiers(t *testing.T) {
	// Identifiers are always quoted: names that need quoting, or that
	// would inject SQL unquoted, work as plain names.
	t.Parallel()
	const table = `Rec"ords; DROP TABLE effects --`
	s, db, schema := setup(t, &pgstore.Config{Table: table})
	g, err := idem.New(s, &idem.Config{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res, replayed, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 201, Body: []byte("ok")}, nil
		})
		if err != nil || replayed != (i == 1) || string(res.Body) != "ok" {
			t.Fatalf("Do %d: body=%q replayed=%v err=%v", i, res.Body, replayed, err)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM `+pgx.Identifier{schema, table}.Sanitize()); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
}

func TestBeginIsReadCommittedWhateverTheDefault(t *testing.T) {
	// DESIGN §7, "snapshot before lock": the read after the lock needs a
	// snapshot of its own, which only READ COMMITTED gives. Begin sets it
	// explicitly, so a connection whose default is REPEATABLE READ still
	// runs the work in READ COMMITTED.
	t.Parallel()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	db := newDB(t, dbOptions{schema: schema, maxConns: 2, runtime: map[string]string{"default_transaction_isolation": "repeatable read"}})
	s, err := sqldb.New(context.Background(), db, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	var def string
	if err := db.QueryRow(`SHOW default_transaction_isolation`).Scan(&def); err != nil || def != "repeatable read" {
		t.Fatalf("default_transaction_isolation = %q, %v; the test needs repeatable read", def, err)
	}
	g, _ := idem.New(s, nil)
	var got string
	_, _, err = g.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqldb.TxFrom(ctx)
		return idem.Result{Status: 200}, tx.QueryRowContext(ctx, `SHOW transaction_isolation`).Scan(&got)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != "read committed" {
		t.Errorf("transaction_isolation in the work = %q, want %q", got, "read committed")
	}
}

func TestCommitConflictsWithALiveRecordWrittenBehindTheLock(t *testing.T) {
	// E2: uniqueness is the constraint's, not the lock's. A live record
	// that appears while a Tx holds the key (written by something that
	// bypassed the lock) is never overwritten: Commit fails with
	// ErrConflict, detected from the driver's SQLSTATE, and the work's
	// effect is rolled back.
	t.Parallel()
	s, db, _ := setup(t, nil)
	ctx := context.Background()
	rec, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0})
	if err != nil || rec != nil {
		t.Fatalf("Begin: rec=%v err=%v", rec, err)
	}
	if _, err := tx.Handle().(*sql.Tx).Exec(`INSERT INTO effects (name) VALUES ('conflict')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO idem_records (scope, key, fingerprint, state, status, body, created_at, expires_at) VALUES ('s', 'k', 'other', 'completed', 200, 'theirs', $1, $2)`, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	err = tx.Commit(ctx, &idem.CommitParams{Record: record("s", "k", t0, time.Hour), Now: t0})
	if !errors.Is(err, idem.ErrConflict) || errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Commit: %v, want ErrConflict (not ErrUnavailable)", err)
	}
	if n := countRows(t, db, `SELECT count(*) FROM effects`); n != 0 {
		t.Errorf("effects = %d, want 0", n)
	}
	got, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"})
	if err != nil || got.Fingerprint != "other" || string(got.Result.Body) != "theirs" {
		t.Errorf("Lookup = %+v, %v; want the other record untouched", got, err)
	}
	if rec, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0}); err != nil || rec == nil || tx != nil {
		t.Errorf("Begin after the conflict: rec=%v tx=%v err=%v, want the live record", rec, tx, err)
	}
}

func TestCommitReplacesOnlyAnExpiredRecord(t *testing.T) {
	// E7 and DESIGN §7 ("replacing an expired record by key alone"): an
	// expired record is replaced; the DELETE before the INSERT carries the
	// expiry test, so a live record is never deleted.
	t.Parallel()
	s, _, _ := setup(t, nil)
	ctx := context.Background()
	commit := func(now time.Time, body string) error {
		rec, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: now})
		if err != nil || rec != nil {
			return fmt.Errorf("Begin: rec=%v err=%v", rec, err)
		}
		r := record("s", "k", now, time.Minute)
		r.Result.Body = []byte(body)
		return tx.Commit(ctx, &idem.CommitParams{Record: r, Now: now})
	}
	if err := commit(t0, "one"); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	if err := commit(later, "two"); err != nil {
		t.Fatalf("replacing the expired record: %v", err)
	}
	got, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"})
	if err != nil || string(got.Result.Body) != "two" || !got.ExpiresAt.Equal(later.Add(time.Minute)) {
		t.Fatalf("Lookup = %+v, %v; want the new record", got, err)
	}
	// A Tx whose Begin saw the record expired (its clock is behind the
	// writer's) must not replace a record live at its commit time.
	rec, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: later.Add(2 * time.Minute)})
	if err != nil || rec != nil {
		t.Fatalf("Begin: rec=%v err=%v", rec, err)
	}
	err = tx.Commit(ctx, &idem.CommitParams{Record: record("s", "k", later, time.Hour), Now: later})
	if !errors.Is(err, idem.ErrConflict) {
		t.Errorf("Commit over a record live at Now: %v, want ErrConflict", err)
	}
}

func TestHashCollisionOnlyCostsInFlight(t *testing.T) {
	// DESIGN §7 ("lock by hash, decide by hash"): with every key hashing
	// to one lock, a second key is refused while the first is held, and
	// once free it runs its own work: never answered with the other
	// key's record.
	t.Parallel()
	s, _, _ := setup(t, nil)
	sqldb.SetLockKey(s, func(string, string) int64 { return 7 })
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

func TestTxOutlivesTheCallersContext(t *testing.T) {
	// The transaction is begun detached from ctx: database/sql would
	// otherwise roll it back on its own as soon as ctx ended, between a
	// successful work and the Guard's commit. Ended ctx or not, the Tx
	// commits the effect with its record.
	t.Parallel()
	s, db, _ := setup(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Handle().(*sql.Tx).ExecContext(ctx, `INSERT INTO effects (name) VALUES ('late')`); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := tx.Handle().(*sql.Tx).Exec(`INSERT INTO effects (name) VALUES ('later')`); err != nil {
		t.Fatalf("the transaction after its caller's ctx ended: %v", err)
	}
	if err := tx.Commit(context.Background(), &idem.CommitParams{Record: record("s", "k", t0, time.Hour), Now: t0}); err != nil {
		t.Fatalf("Commit after the caller's ctx ended: %v", err)
	}
	if n := countRows(t, db, `SELECT count(*) FROM effects`); n != 2 {
		t.Errorf("effects = %d, want 2", n)
	}
}

func TestBeginObeysTheCallersDeadline(t *testing.T) {
	// E8: when no connection can be had before ctx's deadline, Begin fails
	// with a transient ErrUnavailable that says so, instead of waiting on
	// the detached transaction context.
	t.Parallel()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	db := newDB(t, dbOptions{schema: schema, maxConns: 1})
	s, err := sqldb.New(context.Background(), db, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	// A first Begin, so that the one-time connection check is done and
	// the deadline below meets the transaction's own wait.
	if _, tx, err := s.Begin(context.Background(), &idem.BeginParams{Scope: "s", Key: "warm", Now: t0}); err != nil {
		t.Fatal(err)
	} else {
		_ = tx.Rollback(context.Background())
	}
	held, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0})
	if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !sqldb.Transient(err) {
		t.Errorf("Begin on an exhausted pool: %v, want a transient ErrUnavailable wrapping DeadlineExceeded", err)
	}
	held.Close()
	if _, tx, err := s.Begin(context.Background(), &idem.BeginParams{Scope: "s", Key: "k", Now: t0}); err != nil {
		t.Errorf("Begin after release: %v", err)
	} else {
		_ = tx.Rollback(context.Background())
	}
}

func TestWorkThatEndsTheTxIsReported(t *testing.T) {
	// The *sql.Tx of TxFrom belongs to the Guard. A work that commits it
	// itself gets an error that says so, matching ErrUnavailable and
	// sql.ErrTxDone, and not transient: retrying will not cure it.
	t.Parallel()
	s, _, _ := setup(t, nil)
	g, _ := idem.New(s, nil)
	_, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := sqldb.TxFrom(ctx)
		return idem.Result{Status: 200}, tx.Commit()
	})
	if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, sql.ErrTxDone) || sqldb.Transient(err) {
		t.Errorf("Do with a work that committed the tx: %v, want a permanent ErrUnavailable wrapping sql.ErrTxDone", err)
	}
}

func TestTxFrom(t *testing.T) {
	t.Parallel()
	s, _, _ := setup(t, nil)
	g, _ := idem.New(s, nil)
	var kept *sql.Tx
	_, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		tx, ok := sqldb.TxFrom(ctx)
		if !ok || tx == nil {
			return idem.Result{}, errors.New("TxFrom in the work: no transaction")
		}
		kept = tx
		_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('kept')`)
		return idem.Result{Status: 200}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Exec(`SELECT 1`); !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("Exec after Do: %v, want sql.ErrTxDone", err)
	}
	if _, ok := sqldb.TxFrom(context.Background()); ok {
		t.Error("TxFrom(empty context) = ok")
	}
	if _, ok := sqldb.TxFrom(idem.WithTx(context.Background(), otherTx{})); ok {
		t.Error("TxFrom(another store's transaction) = ok")
	}
}

// otherTx is an idem.Tx of some other store.
type otherTx struct{}

func (otherTx) Handle() any                                      { return &sql.Tx{} }
func (otherTx) Commit(context.Context, *idem.CommitParams) error { return nil }
func (otherTx) Rollback(context.Context) error                   { return nil }

// pqError has the shape of lib/pq's *pq.Error: a pointer whose SQLState
// method returns the code.
type pqError struct{ code string }

func (e *pqError) Error() string    { return "pq: something (" + e.code + ")" }
func (e *pqError) SQLState() string { return e.code }

func TestTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"PgxSerialization", &pgconn.PgError{Code: "40001"}, true},
		{"PgxDeadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"PgxAdminShutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"PgxConnectionFailure", &pgconn.PgError{Code: "08006"}, true},
		{"PgxUndefinedTable", &pgconn.PgError{Code: "42P01"}, false},
		{"PqTooManyConnections", &pqError{"53300"}, true},
		{"PqInsufficientPrivilege", &pqError{"42501"}, false},
		{"WrappedPq", fmt.Errorf("wrapped: %w", &pqError{"57P03"}), true},
		{"BadConn", driver.ErrBadConn, true},
		{"ConnDone", sql.ErrConnDone, true},
		{"Deadline", context.DeadlineExceeded, true},
		{"Network", &net.OpError{Op: "read", Err: errors.New("connection reset")}, true},
		{"TxEndedByTheWork", fmt.Errorf("commit: %w", sql.ErrTxDone), false},
		{"TxEndedByADeadline", fmt.Errorf("%w: %w", context.DeadlineExceeded, sql.ErrTxDone), true},
		{"Nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sqldb.Transient(tt.err); got != tt.want {
				t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestUnreachableServerIsUnavailable(t *testing.T) {
	// E8: a server that cannot be reached fails closed, in New (which
	// migrates) and in Begin, with a transient ErrUnavailable.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	db, err := sql.Open("pgx", "postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqldb.New(ctx, db, nil); !errors.Is(err, idem.ErrUnavailable) || !sqldb.Transient(err) {
		t.Errorf("New: %v, want a transient ErrUnavailable", err)
	}
	s, err := sqldb.New(ctx, db, &pgstore.Config{SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0}); !errors.Is(err, idem.ErrUnavailable) || !sqldb.Transient(err) {
		t.Errorf("Begin: %v, want a transient ErrUnavailable", err)
	}
}

func TestWorkThatExecsTheEndOfTheTxRecordsNothing(t *testing.T) {
	// E1: a work that ends the transaction with an Exec of ROLLBACK or
	// COMMIT (which database/sql does not see) and returns success must
	// not get its record committed alone: nothing is recorded and the
	// retry runs.
	t.Parallel()
	for _, stmt := range []string{"ROLLBACK", "COMMIT", "ROLLBACK; BEGIN", "COMMIT; BEGIN"} {
		t.Run(stmt, func(t *testing.T) {
			t.Parallel()
			s, db, _ := setup(t, nil)
			ctx := context.Background()
			g, _ := idem.New(s, nil)
			req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
			_, _, err := g.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
				tx, _ := sqldb.TxFrom(ctx)
				if _, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('e')`); err != nil {
					return idem.Result{}, err
				}
				_, err := tx.ExecContext(ctx, stmt)
				return idem.Result{Status: 201}, err
			})
			if err == nil || sqldb.Transient(err) {
				t.Fatalf("Do: %v, want a permanent error", err)
			}
			if n := countRows(t, db, `SELECT count(*) FROM idem_records`); n != 0 {
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

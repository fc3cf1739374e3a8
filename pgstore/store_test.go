package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// setup returns a store in a fresh schema, its pool (whose search_path is
// that schema, holding an effects table) and the schema's name.
func setup(t *testing.T, cfg *pgstore.Config) (*pgstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	pool := newPool(t, schema, "", 8)
	var c pgstore.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Schema == "" {
		c.Schema = schema
	}
	s, err := pgstore.New(context.Background(), pool, &c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := pool.Exec(context.Background(), `CREATE TABLE `+pgx.Identifier{schema, "effects"}.Sanitize()+` (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s, pool, schema
}

func countRows(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func record(scope, key string, now time.Time, ttl time.Duration) *idem.Record {
	return &idem.Record{Scope: scope, Key: key, Fingerprint: "fp", State: idem.StateCompleted,
		Result: idem.Result{Status: 201, Body: []byte(key)}, CreatedAt: now, ExpiresAt: now.Add(ttl)}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
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
		{"BadUTF8", &pgstore.Config{Schema: "\xff"}, "Config.Schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// SkipMigrate: validation comes before any database access.
			var cfg pgstore.Config
			if tt.cfg != nil {
				cfg = *tt.cfg
			}
			cfg.SkipMigrate = true
			pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			_, err = pgstore.New(context.Background(), pool, &cfg)
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
	s, pool, schema := setup(t, &pgstore.Config{Table: `Rec"ords; DROP TABLE effects --`})
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
	table := pgx.Identifier{schema, `Rec"ords; DROP TABLE effects --`}.Sanitize()
	if n := countRows(t, pool, `SELECT count(*) FROM `+table); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
	// A conflict on this table is still recognised as one: the server
	// names it unquoted, as Config does.
	ctx := context.Background()
	_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k2", Now: t0})
	if err != nil || tx == nil {
		t.Fatalf("Begin: tx=%v err=%v", tx, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (scope, key, fingerprint, state, status, body, created_at, expires_at) VALUES ('s', 'k2', 'fp', 'completed', 200, '', $1, $2)`, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx, &idem.CommitParams{Record: record("s", "k2", t0, time.Hour), Now: t0}); !errors.Is(err, idem.ErrConflict) {
		t.Errorf("Commit behind a live record: %v, want ErrConflict", err)
	}
}

func TestMigrateConcurrentlyFromManyPools(t *testing.T) {
	// Several processes starting at once (here: pools, each its own
	// connections) apply the migrations exactly once, without errors.
	t.Parallel()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		pool := newPool(t, "", "", 2)
		wg.Go(func() {
			<-start
			_, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema})
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("New: %v", err)
		}
	}
	pool := newPool(t, schema, "", 2)
	if got := countRows(t, pool, `SELECT count(*) FROM idem_records_migrations`); got != 1 {
		t.Errorf("migration rows = %d, want 1", got)
	}
	s, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Errorf("Migrate again: %v", err)
	}
}

func TestBatchStatementsTakeTheirOwnSnapshots(t *testing.T) {
	// The claim Begin rests on (DESIGN §7, "snapshot before lock"): in a
	// pgx batch under READ COMMITTED, a statement after the one that
	// waited for a lock sees rows committed while it waited. The same
	// lookup fused into the locking statement does not: its snapshot was
	// taken before the wait. (The blocking lock is used so the wait is
	// certain; the try-lock of Begin has the same snapshot rules.)
	t.Parallel()
	_, pool, _ := setup(t, nil)
	ctx := context.Background()
	const lockID = 4242_0001
	for _, fused := range []bool{false, true} {
		t.Run(map[bool]string{false: "SeparateStatement", true: "FusedStatement"}[fused], func(t *testing.T) {
			name := fmt.Sprintf("snap-%v", fused)
			holder, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback(ctx)
			if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID); err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Exec(ctx, `INSERT INTO effects (name) VALUES ($1)`, name); err != nil {
				t.Fatal(err)
			}
			seen := make(chan int, 1)
			go func() {
				var n int
				b := &pgx.Batch{}
				b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
				if fused {
					b.Queue(`SELECT (SELECT count(*) FROM effects WHERE name = $2) FROM pg_advisory_xact_lock($1)`, lockID, name).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
				} else {
					b.Queue(`SELECT pg_advisory_xact_lock($1)`, lockID)
					b.Queue(`SELECT count(*) FROM effects WHERE name = $1`, name).QueryRow(func(r pgx.Row) error { return r.Scan(&n) })
				}
				conn, err := pool.Acquire(ctx)
				if err != nil {
					t.Error(err)
					seen <- -1
					return
				}
				defer conn.Release()
				br := conn.Conn().SendBatch(ctx, b)
				if err := br.Close(); err != nil {
					t.Error(err)
				}
				_ = br.Tx().Rollback(ctx)
				seen <- n
			}()
			// Wait until the batch is blocked on the lock, then commit.
			deadline := time.Now().Add(10 * time.Second)
			for countRows(t, pool, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, lockID) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the batch never waited for the lock")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := holder.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := <-seen
			want := 1
			if fused {
				want = 0 // the pitfall: the row committed during the wait is missed
			}
			if got != want {
				t.Errorf("rows seen after the lock = %d, want %d", got, want)
			}
		})
	}
}

func TestCommitConflictsWithALiveRecordWrittenBehindTheLock(t *testing.T) {
	// E2: uniqueness is the constraint's, not the lock's. A live record
	// that appears while a Tx holds the key (written by something that
	// bypassed the lock) is never overwritten: Commit fails with
	// ErrConflict and the work's effect is rolled back.
	t.Parallel()
	s, pool, _ := setup(t, nil)
	ctx := context.Background()
	rec, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0})
	if err != nil || rec != nil {
		t.Fatalf("Begin: rec=%v err=%v", rec, err)
	}
	if _, err := tx.Handle().(pgx.Tx).Exec(ctx, `INSERT INTO effects (name) VALUES ('conflict')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO idem_records (scope, key, fingerprint, state, status, body, created_at, expires_at) VALUES ('s', 'k', 'other', 'completed', 200, 'theirs', $1, $2)`, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	err = tx.Commit(ctx, &idem.CommitParams{Record: record("s", "k", t0, time.Hour), Now: t0})
	if !errors.Is(err, idem.ErrConflict) || errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Commit: %v, want ErrConflict (not ErrUnavailable)", err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM effects`); n != 0 {
		t.Errorf("effects = %d, want 0", n)
	}
	got, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"})
	if err != nil || got.Fingerprint != "other" || string(got.Result.Body) != "theirs" {
		t.Errorf("Lookup = %+v, %v; want the other record untouched", got, err)
	}
	// The conflict leaves the key free and the pool healthy.
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
	_, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "other", Now: later})
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
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
	pgstore.SetLockKey(s, func(string, string) int64 { return 7 })
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

func TestHandleBelongsToTheGuard(t *testing.T) {
	// The pgx.Tx given to the work: savepoints work; Commit and Rollback
	// are refused; after Do returns, it is closed and cannot reach a
	// connection that went back to the pool.
	t.Parallel()
	s, pool, _ := setup(t, nil)
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kept pgx.Tx
	_, _, err = g.Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
		tx, ok := pgstore.TxFrom(ctx)
		if !ok {
			return idem.Result{}, errors.New("no tx")
		}
		kept = tx
		if err := tx.Commit(ctx); err == nil {
			t.Error("Commit of the work's tx succeeded, want an error")
		}
		if err := tx.Rollback(ctx); err == nil {
			t.Error("Rollback of the work's tx succeeded, want an error")
		}
		// A failed savepoint rolls back alone.
		_ = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			if _, err := sp.Exec(ctx, `INSERT INTO effects (name) VALUES ('discarded')`); err != nil {
				return err
			}
			return errors.New("undo the savepoint")
		})
		_, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ('kept')`)
		return idem.Result{Status: 200}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Exec(context.Background(), `SELECT 1`); !errors.Is(err, pgx.ErrTxClosed) {
		t.Errorf("Exec after Do: %v, want pgx.ErrTxClosed", err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM effects WHERE name = 'kept'`); n != 1 {
		t.Errorf("kept effects = %d, want 1", n)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM effects WHERE name = 'discarded'`); n != 0 {
		t.Errorf("discarded effects = %d, want 0", n)
	}
	if _, ok := pgstore.TxFrom(context.Background()); ok {
		t.Error("TxFrom(empty context) = ok")
	}
}

func TestUnreachableServerIsUnavailable(t *testing.T) {
	// E8: a server that cannot be reached fails closed with an error that
	// matches ErrUnavailable and keeps the network error.
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = pgstore.Open(ctx, "postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=2", nil)
	if !errors.Is(err, idem.ErrUnavailable) || !pgstore.Transient(err) {
		t.Fatalf("Open: %v, want a transient ErrUnavailable", err)
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		t.Errorf("Open: %v does not unwrap to *pgconn.ConnectError", err)
	}
}

func TestPoolExhaustedIsUnavailable(t *testing.T) {
	// E8: when no connection can be had before the deadline, Begin fails
	// with a transient ErrUnavailable instead of hanging.
	t.Parallel()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	pool := newPool(t, schema, "", 1)
	s, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	held, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: t0})
	if !errors.Is(err, idem.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !pgstore.Transient(err) {
		t.Errorf("Begin on an exhausted pool: %v, want a transient ErrUnavailable wrapping DeadlineExceeded", err)
	}
	held.Release()
	if _, tx, err := s.Begin(context.Background(), &idem.BeginParams{Scope: "s", Key: "k", Now: t0}); err != nil {
		t.Errorf("Begin after release: %v", err)
	} else {
		_ = tx.Rollback(context.Background())
	}
}

func TestTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "53300"}, true},
		{&pgconn.PgError{Code: "42P01"}, false}, // undefined table
		{&pgconn.PgError{Code: "42501"}, false}, // insufficient privilege
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "57P03"}), true},
		{context.DeadlineExceeded, true},
		{&net.OpError{Op: "read", Err: errors.New("connection reset")}, true},
		{nil, false},
	}
	for _, tt := range tests {
		if got := pgstore.Transient(tt.err); got != tt.want {
			t.Errorf("Transient(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// countingConn counts the client's writes: with pgx every round trip is
// one flush, so writes count round trips.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func TestRoundTrips(t *testing.T) {
	// The round trips the package documentation promises, counted on the
	// wire after the statements are prepared.
	t.Parallel()
	pgtest.Require(t)
	for _, probe := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReplayProbe=%v", probe), func(t *testing.T) {
			schema := pgtest.SchemaName(t)
			cfg, err := pgxpool.ParseConfig(pgtest.DSN())
			if err != nil {
				t.Fatal(err)
			}
			var writes atomic.Int64
			d := &net.Dialer{}
			cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{c, &writes}, nil
			}
			cfg.ConnConfig.RuntimeParams["search_path"] = schema
			cfg.MaxConns, cfg.MinConns = 2, 0
			cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			s, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema, ReplayProbe: probe})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(context.Background(), `CREATE TABLE effects (name text NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			g, _ := idem.New(s, nil)
			ctx := context.Background()
			work := func(ctx context.Context) (idem.Result, error) {
				tx, _ := pgstore.TxFrom(ctx)
				_, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ('rt')`)
				return idem.Result{Status: 201}, err
			}
			// Warm both connections so that every statement is prepared
			// on each: run a first execution and a replay while the other
			// connection is held.
			for i := range 2 {
				c1, _ := pool.Acquire(ctx)
				c2, _ := pool.Acquire(ctx)
				held := []*pgxpool.Conn{c1, c2}[i]
				[]*pgxpool.Conn{c1, c2}[1-i].Release()
				for range 2 {
					if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: fmt.Sprint("warm", i)}, work); err != nil {
						t.Fatal(err)
					}
				}
				_, holder, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "warm-held", Now: time.Now()})
				if err != nil {
					t.Fatal(err)
				}
				held.Release()
				if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "warm-held"}, work); !errors.Is(err, idem.ErrInFlight) {
					t.Fatalf("warm in flight: %v", err)
				}
				_ = holder.Rollback(ctx)
			}
			measure := func(f func()) int64 {
				before := writes.Load()
				f()
				return writes.Load() - before
			}
			first := measure(func() {
				if _, replayed, err := g.Do(ctx, idem.Request{Scope: "s", Key: "new"}, work); err != nil || replayed {
					t.Fatalf("first: replayed=%v err=%v", replayed, err)
				}
			})
			replay := measure(func() {
				if _, replayed, err := g.Do(ctx, idem.Request{Scope: "s", Key: "new"}, work); err != nil || !replayed {
					t.Fatalf("replay: replayed=%v err=%v", replayed, err)
				}
			})
			_, holder, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "held", Now: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			inFlight := measure(func() {
				if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "held"}, work); !errors.Is(err, idem.ErrInFlight) {
					t.Fatalf("in flight: %v", err)
				}
			})
			_ = holder.Rollback(ctx)
			want := [3]int64{3, 2, 2} // begin, work, commit | begin, rollback | begin, rollback
			if probe {
				want = [3]int64{4, 1, 1} // probe, begin, work, commit | probe | probe
			}
			if got := [3]int64{first, replay, inFlight}; got != want {
				t.Errorf("round trips (first, replay, in flight) = %v, want %v", got, want)
			}
		})
	}
}

func TestDeferredUniqueViolationOfTheWorkIsNotAConflict(t *testing.T) {
	// A unique violation that the work's own DEFERRABLE constraint raises
	// at COMMIT is the work's failure: it is not ErrConflict (which would
	// look for a record that does not exist and answer "in flight" to
	// every retry), nothing commits, and the key stays free.
	t.Parallel()
	s, pool, _ := setup(t, nil)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE uniq (v int, CONSTRAINT uniq_v UNIQUE (v) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	g, _ := idem.New(s, nil)
	_, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
		tx, _ := pgstore.TxFrom(ctx)
		_, err := tx.Exec(ctx, `INSERT INTO uniq VALUES (1), (1)`) // checked at COMMIT
		return idem.Result{Status: 201}, err
	})
	var ife *idem.InFlightError
	if err == nil || errors.As(err, &ife) || errors.Is(err, idem.ErrConflict) {
		t.Fatalf("Do: %v, want the work's constraint failure, not a conflict or in-flight", err)
	}
	if pgstore.Transient(err) {
		t.Errorf("Transient(%v) = true; a constraint violation will not go away", err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM uniq`); n != 0 {
		t.Errorf("uniq rows = %d, want 0", n)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM idem_records`); n != 0 {
		t.Errorf("records = %d, want 0", n)
	}
}

func TestWorkThatEndsTheTransactionRecordsNothing(t *testing.T) {
	// E1: a work that ends the transaction itself (an Exec of ROLLBACK or
	// COMMIT through the handle) and returns success must not get its
	// record committed alone: nothing is recorded and the retry runs.
	t.Parallel()
	for _, stmt := range []string{"ROLLBACK", "COMMIT", "ROLLBACK; BEGIN", "COMMIT; BEGIN"} {
		t.Run(stmt, func(t *testing.T) {
			t.Parallel()
			s, pool, _ := setup(t, nil)
			ctx := context.Background()
			g, _ := idem.New(s, nil)
			req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
			_, _, err := g.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
				tx, _ := pgstore.TxFrom(ctx)
				if _, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ('e')`); err != nil {
					return idem.Result{}, err
				}
				_, err := tx.Exec(ctx, stmt)
				return idem.Result{Status: 201}, err
			})
			if err == nil {
				t.Fatal("Do: nil error, want the refused commit")
			}
			if n := countRows(t, pool, `SELECT count(*) FROM idem_records`); n != 0 {
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

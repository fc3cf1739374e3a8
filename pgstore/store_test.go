package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// setup returns a store in a fresh schema, its pool (whose search_path is
// that schema, holding an effects table) and the schema's name.
func setup(t testing.TB, cfg *pgstore.Config) (*pgstore.Store, *pgxpool.Pool, string) {
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

func countRows(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestBatchStatementsTakeTheirOwnSnapshots(t *testing.T) {
	// The claim Begin rests on (docs/DESIGN.md, pitfall "snapshot before
	// lock"; docs/POSTGRES.md): in a
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

func TestConfigProbeConns(t *testing.T) {
	// Config.ProbeConns is pgstore's own: checked before any database
	// access, like the fields both stores share.
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, n := range []int{-1, 0, 2, 1024} {
		if _, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: "s", SkipMigrate: true, ProbeConns: n}); err != nil {
			t.Errorf("ProbeConns %d: %v, want nil", n, err)
		}
	}
	if _, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: "s", SkipMigrate: true, ProbeConns: 1025}); err == nil || !strings.Contains(err.Error(), "Config.ProbeConns") {
		t.Errorf("ProbeConns 1025: %v, want an error naming Config.ProbeConns", err)
	}
}

func TestOpen(t *testing.T) {
	// Open owns its pool: the store works on it, Close closes it. On a
	// server that cannot be reached it fails closed, with a transient
	// ErrUnavailable that keeps the network error.
	t.Parallel()
	schema, dsn := pgtest.Schema(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := idem.New(s, nil)
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k"}, func(context.Context) (idem.Result, error) {
		return idem.Result{Status: 201}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s.Pool(), `SELECT count(*) FROM `+pgx.Identifier{schema, "idem_records"}.Sanitize()); n != 1 {
		t.Errorf("records in the URL's search_path = %d, want 1", n)
	}
	_ = s.Close()
	if err := s.Pool().Ping(ctx); err == nil {
		t.Error("the pool still answers after Close")
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = pgstore.Open(ctx, "postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=2", nil)
	var ce *pgconn.ConnectError
	if !errors.Is(err, idem.ErrUnavailable) || !pgstore.Transient(err) || !errors.As(err, &ce) {
		t.Errorf("Open: %v, want a transient ErrUnavailable wrapping *pgconn.ConnectError", err)
	}
}

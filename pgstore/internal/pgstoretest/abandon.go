package pgstoretest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
)

// appName returns an application_name unique to the test, within
// PostgreSQL's 63 bytes: other tests run at the same time and have
// backends of their own.
func appName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// waitForBackend waits until a backend of application_name app is in the
// state that where (a condition on pg_stat_activity) describes.
func waitForBackend(t *testing.T, e *Env, app, where, what string) {
	t.Helper()
	for i := 0; ; i++ {
		if count(t, e, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND `+where, app) > 0 {
			return
		}
		if i == 1000 {
			t.Fatalf("the work's backend never %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// retryUntilFree retries req on g, answered "in flight", until it runs,
// and returns how long that took; it fails the test after limit.
func retryUntilFree(t *testing.T, g *idem.Guard, req idem.Request, work idem.Work, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		_, replayed, err := g.Do(context.Background(), req, work)
		if err == nil {
			if replayed {
				t.Fatal("retry: replayed, want a new execution")
			}
			return time.Since(start)
		}
		if !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("retry: %v", err)
		}
		if time.Since(start) > limit {
			t.Fatalf("the key was still in flight after %s", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// E3: a crash must never leave a key stuck in flight. A process whose work
// waits on a row lock when it dies leaves a backend that is still waiting;
// the key's advisory lock is that backend's until it notices its client is
// gone. With client_connection_check_interval set for the transaction it
// notices within a second, so the key is free again while the row lock is
// still held, instead of "in flight" for as long as the wait lasts.
func testAbandonedTransactionFreesKey(t *testing.T, d Driver) {
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	ctx := context.Background()

	// The process that dies: sockets the test can cut, as the kernel does
	// when a process is killed, and no new ones after its death (not even
	// the cancel request that pgx sends for a connection it gives up on).
	var (
		mu    sync.Mutex
		conns []net.Conn
		dead  atomic.Bool
	)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dead.Load() {
			return nil, errors.New("the process is dead")
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	app := appName("abandon")
	dying := open(t, d, Conn{SearchPath: schema, AppName: app, Dial: dial}, Config{Schema: schema})
	g1 := newGuard(t, dying.Store, nil)

	// The survivor, and a transaction holding the row the work needs
	// (with no idle timeout of its own: it waits for the test).
	e := open(t, d, Conn{SearchPath: schema, MaxConns: 4}, Config{Schema: schema, IdleInTransactionTimeout: -1})
	mustExec(t, e, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL)`)
	mustExec(t, e, `INSERT INTO accounts VALUES ('a', 100)`)
	_, holder, err := e.Store.Begin(ctx, &idem.BeginParams{Scope: "holder", Key: "row", Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if err := execIn(ctx, d, holder, `SELECT FROM accounts WHERE id = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	done := make(chan error, 1)
	go func() {
		_, _, err := g1.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 201}, execIn(ctx, d, nil, `UPDATE accounts SET balance = balance - 1 WHERE id = 'a'`)
		})
		done <- err
	}()
	// Wait until the UPDATE is blocked on the row lock, then "crash".
	waitForBackend(t, e, app, `wait_event_type = 'Lock'`, "waited on the row lock")
	dead.Store(true)
	mu.Lock()
	for _, c := range conns {
		_ = c.Close()
	}
	mu.Unlock()
	if err := <-done; err == nil {
		t.Fatal("the cut-off call succeeded")
	}

	// A retry from another process, while the row is still held: it is
	// refused "in flight" only until the orphaned backend notices (10 s,
	// ten times the check interval).
	g2 := newGuard(t, e.Store, nil)
	retryUntilFree(t, g2, req, func(ctx context.Context) (idem.Result, error) {
		return idem.Result{Status: 202}, nil
	}, 10*time.Second)
}

// A host that vanishes without a reset (a power loss, a partition, a
// dropped VM) while its work sits between two statements leaves a backend
// idle in transaction, holding the key's lock: no check of the socket
// sees anything wrong, and TCP keepalive would give up after about two
// hours. The store's idle_in_transaction_session_timeout bounds it: the
// key is claimable again within that bound, and the abandoned
// transaction's effect never commits, even when the host's packets arrive
// after all.
func testVanishedHost(t *testing.T, d Driver) {
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	ctx := context.Background()
	const bound = 2 * time.Second

	hole, _ := pgtest.Proxy(t, pgtest.DSN())
	app := appName("vanish")
	far := open(t, d, Conn{SearchPath: schema, AppName: app, MaxConns: 1, Dial: hole.Dial}, Config{Schema: schema, IdleInTransactionTimeout: bound})
	// Should the test fail with the host's call still in the hole, let
	// it through before the pool is closed, which waits for it.
	t.Cleanup(hole.Resume)
	near, _ := setupIn(t, d, schema)

	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	between, goOn := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		// The host's own deadline outlasts the test: only the server
		// can end this transaction.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		_, _, err := newGuard(t, far.Store, nil).Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			if err := execIn(ctx, d, nil, `INSERT INTO effects (name) VALUES ('abandoned')`); err != nil {
				return idem.Result{}, err
			}
			close(between) // waiting on a downstream call, say
			<-goOn
			return idem.Result{Status: 201}, execIn(ctx, d, nil, `INSERT INTO effects (name) VALUES ('late')`)
		})
		done <- err
	}()
	<-between
	waitForBackend(t, near, app, `state = 'idle in transaction' AND wait_event = 'ClientRead'`, "sat idle in transaction")
	hole.Hold()
	vanished := time.Now()
	close(goOn) // the host's next statements go into the hole

	g := newGuard(t, near.Store, nil)
	if _, _, err := g.Do(ctx, req, effect(d, "near", idem.Result{Status: 201})); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("a retry while the vanished host holds the key: %v, want ErrInFlight", err)
	}
	// Generous: the bound is the server's timer, the rest is the
	// machine's load.
	took := retryUntilFree(t, g, req, effect(d, "near", idem.Result{Status: 201}), bound+20*time.Second)
	t.Logf("the key was claimable again %s after the host vanished (bound %s)", took.Round(time.Millisecond), bound)

	// The host's packets arrive after all: its transaction is gone.
	hole.Resume()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the vanished host's call succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the vanished host's call never returned after its packets went through")
	}
	t.Logf("vanished after %s", time.Since(vanished).Round(time.Millisecond))
	for name, want := range map[string]int{"abandoned": 0, "late": 0, "near": 1} {
		if n := count(t, near, `SELECT count(*) FROM effects WHERE name = $1`, name); n != want {
			t.Errorf("effects %q = %d, want %d", name, n, want)
		}
	}
	if n := count(t, near, `SELECT count(*) FROM idem_records`); n != 1 {
		t.Errorf("records = %d, want 1", n)
	}
}

// setupIn opens a store in schema, which must exist or be created by it,
// on 8 connections whose search_path it is, and creates the effects table
// if it is missing.
func setupIn(t *testing.T, d Driver, schema string) (*Env, string) {
	t.Helper()
	e := open(t, d, Conn{SearchPath: schema}, Config{Schema: schema})
	mustExec(t, e, `CREATE TABLE IF NOT EXISTS effects (name text NOT NULL)`)
	return e, schema
}

// What a legitimate work that pauses longer than the bound between two
// statements gets: the server ends its session, its next statement fails
// with a transient error, nothing is recorded, and the retry runs afresh.
func testSlowWorkPastTheBound(t *testing.T, d Driver) {
	e, _ := setup(t, d, Config{IdleInTransactionTimeout: time.Second})
	g := newGuard(t, e.Store, nil)
	ctx := context.Background()
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	_, _, err := g.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
		if err := execIn(ctx, d, nil, `INSERT INTO effects (name) VALUES ('slow')`); err != nil {
			return idem.Result{}, err
		}
		time.Sleep(2500 * time.Millisecond) // a downstream call longer than the bound
		return idem.Result{Status: 201}, execIn(ctx, d, nil, `INSERT INTO effects (name) VALUES ('slow')`)
	})
	if err == nil || !d.Transient(err) {
		t.Fatalf("Do of a work idle past the bound: %v, want a transient error", err)
	}
	if _, err := e.Store.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k"}); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup: %v, want ErrNotFound", err)
	}
	if n := count(t, e, `SELECT count(*) FROM effects`); n != 0 {
		t.Errorf("effects = %d, want 0", n)
	}
	if _, replayed, err := g.Do(ctx, req, effect(d, "fast", idem.Result{Status: 201})); err != nil || replayed {
		t.Errorf("retry: replayed=%v err=%v, want a fresh run", replayed, err)
	}
}

// The bound is set for the store's transaction only: the work sees it,
// the rest of the connection's life keeps the server's setting.
func testIdleTimeoutIsTheTransactions(t *testing.T, d Driver) {
	for _, tt := range []struct {
		name string
		idle time.Duration
		want string // "" for the server's own
	}{
		{"Default", 0, "30s"},
		{"Set", 1500 * time.Millisecond, "1500ms"},
		{"Off", -1, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pgtest.Require(t)
			schema := pgtest.SchemaName(t)
			// One connection: the one the work ran on is read after it.
			e := open(t, d, Conn{SearchPath: schema, MaxConns: 1}, Config{Schema: schema, IdleInTransactionTimeout: tt.idle})
			const q = `SELECT current_setting('idle_in_transaction_session_timeout')`
			var server, in, after string
			if err := e.DB.QueryRow(context.Background(), q).Scan(&server); err != nil {
				t.Fatal(err)
			}
			_, _, err := newGuard(t, e.Store, nil).Do(context.Background(), idem.Request{Scope: "s", Key: "k"}, func(ctx context.Context) (idem.Result, error) {
				return idem.Result{Status: 200}, queryRow(ctx, d, nil, q).Scan(&in)
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.DB.QueryRow(context.Background(), q).Scan(&after); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == "" {
				want = server
			}
			if in != want || after != server {
				t.Errorf("idle_in_transaction_session_timeout = %q in the work, %q after it; want %q and the server's %q", in, after, want, server)
			}
		})
	}
}

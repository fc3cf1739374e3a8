package pgstore_test

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
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// E3: a crash must never leave a key stuck in flight. A process whose work
// waits on a row lock when it dies leaves a backend that is still waiting;
// the key's advisory lock is that backend's until it notices its client is
// gone. With client_connection_check_interval set for the transaction it
// notices within a second, so the key is free again while the row lock is
// still held, instead of "in flight" for as long as the wait lasts.
func TestAbandonedTransactionFreesKey(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	ctx := context.Background()

	// The process that dies: a pool whose sockets the test can cut, as
	// the kernel does when a process is killed.
	cfg, err := pgxpool.ParseConfig(pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		dead  atomic.Bool
	)
	d := &net.Dialer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dead.Load() {
			// A dead process sends nothing more, not even the cancel
			// request that pgx sends for a connection it gives up on.
			return nil, errors.New("the process is dead")
		}
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	// Its own application_name: other packages' tests run at the same
	// time and may have backends waiting on locks too.
	appName := fmt.Sprintf("abandon-%d", time.Now().UnixNano()) // within 63 bytes
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	dying, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dying.Close()
	s1, err := pgstore.New(ctx, dying, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	g1, _ := idem.New(s1, nil)

	// The survivor, and a session holding the row the work needs.
	pool := newPool(t, schema, "", 4)
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts VALUES ('a', 100)`); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `SELECT FROM accounts WHERE id = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	waiting := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := g1.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			tx, _ := pgstore.TxFrom(ctx)
			close(waiting)
			_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = 'a'`)
			return idem.Result{Status: 201}, err
		})
		done <- err
	}()
	<-waiting
	// Wait until the UPDATE is blocked on the row lock, then "crash".
	for i := 0; ; i++ {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND application_name = $1`, appName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if i == 500 {
			t.Fatal("the work never waited on the row lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	// refused "in flight" only until the orphaned backend notices.
	s2, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := idem.New(s2, nil)
	for i := 0; ; i++ {
		_, _, err := g2.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 202}, nil
		})
		if err == nil {
			break
		}
		if !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("retry: %v", err)
		}
		if i == 100 { // 10 s, ten times the check interval
			t.Fatal("the key stayed in flight while the dead process's backend waited on the row lock")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

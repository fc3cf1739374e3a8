package sqldb_test

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
	"github.com/idemkit/idem/pgstore/sqldb"
)

// E3: a crash must never leave a key stuck in flight. A process that dies
// while its work waits on a row lock leaves a waiting backend that holds
// the key's advisory lock; the connection check set by the locking
// statement makes it abort within a second, while the row is still held.
func TestAbandonedTransactionFreesKey(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	ctx := context.Background()

	// The process that dies: sockets the test can cut, and no new ones
	// after its death (not even pgx's cancel request).
	var (
		mu    sync.Mutex
		conns []net.Conn
		dead  atomic.Bool
	)
	d := &net.Dialer{}
	// Its own application_name: other packages' tests run at the same
	// time and may have backends waiting on locks too.
	appName := fmt.Sprintf("abandon-%d", time.Now().UnixNano()) // within 63 bytes
	dying := newDB(t, dbOptions{schema: schema, appName: appName, dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dead.Load() {
			return nil, errors.New("the process is dead")
		}
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}})
	s1, err := sqldb.New(ctx, dying, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	g1, _ := idem.New(s1, nil)

	db := newDB(t, dbOptions{schema: schema, maxConns: 4})
	if _, err := db.Exec(`CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts VALUES ('a', 100)`); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.Exec(`SELECT FROM accounts WHERE id = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	done := make(chan error, 1)
	go func() {
		_, _, err := g1.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			tx, _ := sqldb.TxFrom(ctx)
			_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = 'a'`)
			return idem.Result{Status: 201}, err
		})
		done <- err
	}()
	for i := 0; ; i++ {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity
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

	s2, err := sqldb.New(ctx, db, &pgstore.Config{Schema: schema})
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

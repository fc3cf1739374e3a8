package pgcluster

import (
	"context"
	"strconv"
	"testing"

	"github.com/idemkit/idem/internal/servertest"

	"github.com/jackc/pgx/v5"
)

// A row committed on the primary is on the standby once it is promoted
// after the primary's SIGKILL, and the multi-host URL reaches the
// promoted standby, in both modes (with synchronous replication the
// commit waited for the standby; with asynchronous replication the test
// waits for the replay, which is what a quiet primary gets).
func TestFailover(t *testing.T) {
	servertest.Cluster(t)
	t.Parallel()
	for _, sync := range []bool{true, false} {
		name := "async"
		if sync {
			name = "sync"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := Start(t, Options{Sync: sync})
			conn, err := pgx.Connect(ctx, c.URL("postgres"))
			if err != nil {
				t.Fatal(err)
			}
			if conn.PgConn().Conn().RemoteAddr().String() != "127.0.0.1:"+strconv.Itoa(c.Primary.Port) {
				t.Fatalf("the multi-host URL reached %s, want the primary", conn.PgConn().Conn().RemoteAddr())
			}
			var lsn string
			if _, err := conn.Exec(ctx, `CREATE TABLE t (v int); INSERT INTO t VALUES (42)`); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
				t.Fatal(err)
			}
			conn.Close(ctx)
			if !sync {
				waitReplayed(t, c.Standby, lsn)
			}
			c.Primary.Kill()
			if _, err := pgx.Connect(ctx, c.URL("postgres")); err == nil {
				t.Fatal("the multi-host URL connected to a read-only standby")
			}
			if err := c.Standby.Promote(ctx); err != nil {
				t.Fatal(err)
			}
			conn, err = pgx.Connect(ctx, c.URL("postgres"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var v int
			if err := conn.QueryRow(ctx, `SELECT v FROM t`).Scan(&v); err != nil || v != 42 {
				t.Fatalf("after the failover: %d, %v; want 42", v, err)
			}
			if _, err := conn.Exec(ctx, `INSERT INTO t VALUES (43)`); err != nil {
				t.Fatalf("the promoted standby refused a write: %v", err)
			}
		})
	}
}

func waitReplayed(t *testing.T, n *Node, lsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = poll(ctx, func() error {
		var done bool
		if err := conn.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&done); err != nil {
			return err
		}
		if !done {
			return context.DeadlineExceeded
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the standby did not replay %s: %v", lsn, err)
	}
}

package sqldb_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/sqldb"
)

// countingConn counts the client's writes: pgx flushes each round trip in
// one write, so writes count round trips.
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
	// wire with pgx's stdlib driver once the statements are prepared on
	// every connection, and pings turned off (database/sql's pgx driver
	// otherwise pings a connection idle for over a second).
	t.Parallel()
	pgtest.Require(t)
	for _, probe := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReplayProbe=%v", probe), func(t *testing.T) {
			schema := pgtest.SchemaName(t)
			var writes atomic.Int64
			d := &net.Dialer{}
			db := newDB(t, dbOptions{schema: schema, maxConns: 2, noPing: true, dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{c, &writes}, nil
			}})
			s, err := sqldb.New(context.Background(), db, &pgstore.Config{Schema: schema, ReplayProbe: probe})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`CREATE TABLE effects (name text NOT NULL)`); err != nil {
				t.Fatal(err)
			}
			g, _ := idem.New(s, nil)
			ctx := context.Background()
			work := func(ctx context.Context) (idem.Result, error) {
				tx, _ := sqldb.TxFrom(ctx)
				_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('rt')`)
				return idem.Result{Status: 201}, err
			}
			plain := func() error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('rt')`); err != nil {
					_ = tx.Rollback()
					return err
				}
				return tx.Commit()
			}
			// Warm both connections, so that every statement is prepared on
			// each: with one connection held, the calls run on the other.
			held, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				for range 2 { // a first execution, then its replay
					if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: fmt.Sprint("warm", i)}, work); err != nil {
						t.Fatal(err)
					}
				}
				if err := plain(); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					other, err := db.Conn(ctx) // the connection just warmed: the only idle one
					if err != nil {
						t.Fatal(err)
					}
					held.Close()
					held = other
				}
			}
			held.Close()

			measure := func(f func()) int64 {
				before := writes.Load()
				f()
				return writes.Load() - before
			}
			plainTx := measure(func() {
				if err := plain(); err != nil {
					t.Fatal(err)
				}
			})
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
			// BEGIN, the work's INSERT, COMMIT.
			if plainTx != 3 {
				t.Errorf("round trips of the plain transaction = %d, want 3", plainTx)
			}
			// BEGIN, lock, SELECT, work, INSERT, COMMIT | BEGIN, lock,
			// SELECT, ROLLBACK | the same.
			want := [3]int64{6, 4, 4}
			if probe {
				// probe, then the above | probe | probe.
				want = [3]int64{7, 1, 1}
			}
			if got := [3]int64{first, replay, inFlight}; got != want {
				t.Errorf("round trips (first, replay, in flight) = %v, want %v", got, want)
			}
		})
	}
}

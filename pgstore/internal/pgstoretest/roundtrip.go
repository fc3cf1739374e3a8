package pgstoretest

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
	"github.com/idemkit/idem/pgstore/internal/pgschema"
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

func testRoundTrips(t *testing.T, d Driver) {
	// The round trips docs/POSTGRES.md promises, counted on the
	// wire once the statements are prepared on every connection, with
	// pings turned off (pgx pings a connection idle for over a second).
	pgtest.Require(t)
	for _, probe := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReplayProbe=%v", probe), func(t *testing.T) {
			schema := pgtest.SchemaName(t)
			var writes atomic.Int64
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{c, &writes}, nil
			}
			e := open(t, d, Conn{SearchPath: schema, MaxConns: 2, NoPing: true, Dial: dial}, Config{Schema: schema, ReplayProbe: probe})
			mustExec(t, e, `CREATE TABLE effects (name text NOT NULL)`)
			g := newGuard(t, e.Store, nil)
			ctx := context.Background()
			work := effect(d, "rt", idem.Result{Status: 201})
			plain := func() error {
				return e.InTx(ctx, func(tx pgschema.Querier) error {
					return tx.Exec(ctx, `INSERT INTO effects (name) VALUES ('rt')`)
				})
			}
			// Warm both connections, so that every statement is prepared
			// on each: with one connection held, the calls run on the
			// other.
			held, err := e.Hold(ctx)
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
					other, err := e.Hold(ctx) // the connection just warmed: the only idle one
					if err != nil {
						t.Fatal(err)
					}
					held()
					held = other
				}
			}
			held()

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
			_, holder, err := e.Store.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "held", Now: time.Now()})
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
			// The work's INSERT is one of the first execution's.
			want := d.RoundTrips(probe)
			want.First++
			if got := (RoundTrips{first, replay, inFlight}); got != want {
				t.Errorf("round trips (first, replay, in flight) = %v, want %v", got, want)
			}
		})
	}
}

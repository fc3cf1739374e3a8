package pgstore_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

func TestLeasedRoundTrips(t *testing.T) {
	// The round trips docs/POSTGRES.md ("Leased mode") promises for each
	// operation, counted on the wire on one connection whose statements
	// are prepared, with pings turned off.
	t.Parallel()
	pgtest.Require(t)
	schema, dsn := pgtest.Schema(t)
	ctx := context.Background()
	var writes atomic.Int64
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1
	pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, ProbeConns: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	// One pass of every operation; measured, it says how many round
	// trips each took.
	pass := func(key string, measure func(op string, f func() error)) {
		var c, c2 *idem.Claim
		measure("Claim (new)", func() (err error) {
			c, err = s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Now: lt0, Lease: lease})
			return err
		})
		measure("Claim (in flight)", func() error {
			_, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Now: lt0, Lease: lease})
			return err
		})
		measure("Heartbeat", func() error {
			return s.Heartbeat(ctx, &idem.HeartbeatParams{Lease: c.Lease, Now: lt0, Duration: lease})
		})
		measure("SaveStep", func() error {
			return s.SaveStep(ctx, &idem.SaveStepParams{Lease: c.Lease, Name: "a", Output: []byte("x"), Now: lt0})
		})
		measure("Release", func() error {
			return s.Release(ctx, &idem.ReleaseParams{Lease: c.Lease, Now: lt0, RetryAt: lt0, Error: "e"})
		})
		measure("Claim (takeover)", func() (err error) {
			c2, err = s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Now: lt0, Lease: lease})
			return err
		})
		var st idem.StepTx
		measure("BeginStep", func() (err error) {
			st, err = s.BeginStep(ctx, &idem.BeginStepParams{Lease: c2.Lease, Name: "b", Now: lt0})
			return err
		})
		if _, err := st.Handle().(pgx.Tx).Exec(ctx, `INSERT INTO effects (name) VALUES ('b')`); err != nil {
			t.Fatal(err)
		}
		measure("StepTx.Commit", func() error { return st.Commit(ctx, []byte("y")) })
		measure("Complete", func() error {
			return s.Complete(ctx, &idem.CompleteParams{Lease: c2.Lease, Result: idem.Result{Status: 201}, Now: lt0, ExpiresAt: lt0.Add(time.Hour)})
		})
		measure("Claim (replay)", func() error {
			_, err := s.Claim(ctx, &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Now: lt0, Lease: lease})
			return err
		})
		measure("Abandoned", func() error {
			_, err := s.Abandoned(ctx, &idem.AbandonedParams{Now: lt0, Limit: 10})
			return err
		})
	}
	pass("warm", func(op string, f func() error) {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	})
	pass("measured", func(op string, f func() error) {
		before := writes.Load()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if got := writes.Load() - before; got != 1 {
			t.Errorf("%s: %d round trips, want 1", op, got)
		}
	})
}

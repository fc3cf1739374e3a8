package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/sqldb"
)

// errWorkFault marks the work's own failures: the Guard returns the work's
// error as it is, so a fault that lands inside the work reaches the caller
// as the work's error, not as ErrUnavailable. It must still be transient,
// and it must still have rolled everything back.
var errWorkFault = errors.New("the work failed")

func TestTerminatedBackendsUnderLoad(t *testing.T) {
	// E1, E8 under faults: the test's own backends (picked by
	// application_name, since other tests run in parallel) are killed with
	// pg_terminate_backend, one every few milliseconds and only while
	// they are in a transaction, as eight workers run keys through
	// database/sql; the load goes on until ten have been killed. Then:
	//
	//   - every key has either exactly one effect and its record, or
	//     neither (no duplicate, no effect without its record);
	//   - every key whose Do succeeded has both (no lost committed result);
	//   - every failure was a transient ErrUnavailable, ErrInFlight (the
	//     server had not yet reaped a killed holder), or the work's own
	//     transient fault;
	//   - the same *sql.DB, never reopened, then replays every key.
	//
	// Nothing is timed: the checks hold whenever the kills land.
	t.Parallel()
	pgtest.Require(t)
	const (
		workers = 8
		keys    = 200   // fed at least, and on until the kills are done
		maxKeys = 10000 // bounds the load if the kills never complete
		kills   = 10
	)
	schema := pgtest.SchemaName(t)
	appName := "sqldb-fault-" + schema
	ctx := context.Background()
	// No pings: a killed connection that was idle must fail its next use,
	// where it is counted, rather than be replaced silently.
	db := newDB(t, dbOptions{schema: schema, appName: appName, maxConns: workers, noPing: true})
	s, err := sqldb.New(ctx, db, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE effects (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := newDB(t, dbOptions{maxConns: 1})
	work := func(key string) idem.Work {
		return func(ctx context.Context) (idem.Result, error) {
			tx, _ := sqldb.TxFrom(ctx)
			if _, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ($1)`, key); err != nil {
				return idem.Result{}, fmt.Errorf("%w: %w", errWorkFault, err)
			}
			// Widen the window in which a fault lands inside the work.
			if _, err := tx.ExecContext(ctx, `SELECT pg_sleep(0.001)`); err != nil {
				return idem.Result{}, fmt.Errorf("%w: %w", errWorkFault, err)
			}
			return idem.Result{Status: 201, Body: []byte(key)}, nil
		}
	}
	var ok, unavailable, inFlight, workFault, killed atomic.Int64
	// classify counts a failed call, and reports one that breaks the rules.
	classify := func(key string, err error) {
		switch {
		case errors.Is(err, idem.ErrInFlight):
			inFlight.Add(1)
		case errors.Is(err, idem.ErrUnavailable) && sqldb.Transient(err):
			unavailable.Add(1)
		case errors.Is(err, errWorkFault) && sqldb.Transient(err):
			workFault.Add(1)
		default:
			t.Errorf("%s: %v, want a transient ErrUnavailable, ErrInFlight or the work's transient fault", key, err)
		}
	}
	// do runs key until it succeeds, at most attempts times.
	do := func(key string, attempts int) (res idem.Result, replayed bool, err error) {
		for range attempts {
			// A deadline, as any real request has.
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			res, replayed, err = g.Do(cctx, idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, work(key))
			cancel()
			if err == nil {
				return res, replayed, nil
			}
			classify(key, err)
			time.Sleep(2 * time.Millisecond)
		}
		return res, replayed, err
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	disrupted := make(chan struct{})
	go func() {
		defer close(disrupted)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for killed.Load() < kills {
			select {
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
			var n int64
			err := admin.QueryRowContext(loadCtx, `SELECT count(pg_terminate_backend(pid)) FROM (
	SELECT pid FROM pg_stat_activity
	WHERE application_name = $1 AND state IN ('active', 'idle in transaction')
	ORDER BY random() LIMIT 1) AS victims`, appName).Scan(&n)
			if err == nil {
				killed.Add(n)
			}
		}
	}()

	names := make([]string, maxKeys)
	succeeded := make([]bool, maxKeys)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				res, _, err := do(names[i], 1000)
				if err == nil {
					if string(res.Body) != names[i] {
						t.Errorf("%s: body %q", names[i], res.Body)
					}
					succeeded[i] = true
					ok.Add(1)
				}
			}
		})
	}
	fed := 0
feed:
	for i := range maxKeys {
		if i >= keys {
			select {
			case <-disrupted:
				break feed
			default:
			}
		}
		names[i] = fmt.Sprintf("key-%05d", i)
		next <- i
		fed++
	}
	close(next)
	wg.Wait()
	stopLoad()
	<-disrupted
	names, succeeded = names[:fed], succeeded[:fed]
	if n := killed.Load(); n < kills {
		t.Fatalf("%d backends killed in %d keys, want %d", n, fed, kills)
	}

	// Hand out every connection of the pool at once and ping it: a killed
	// connection left idle fails here and is discarded, so the checks
	// below meet only live ones.
	var flushed int64
	conns := make([]*sql.Conn, 0, workers)
	for range workers {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if err := c.PingContext(ctx); err != nil {
			flushed++
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	t.Logf("%d keys: ok %d, unavailable %d, in flight %d, work faults %d; %d backends killed, %d dead connections flushed",
		fed, ok.Load(), unavailable.Load(), inFlight.Load(), workFault.Load(), killed.Load(), flushed)
	// Each killed backend was a connection of db, in a transaction when it
	// was picked: it failed a call, or it was flushed.
	if landed := unavailable.Load() + workFault.Load() + flushed; landed == 0 {
		t.Errorf("%d backends killed but no call failed and no connection was dead: the faults did not land", killed.Load())
	}

	verify := func(succeeded []bool) {
		t.Helper()
		rows, err := db.QueryContext(ctx, `
SELECT k, (SELECT count(*) FROM effects e WHERE e.name = k),
       EXISTS (SELECT FROM idem_records r WHERE r.scope = 's' AND r.key = k)
FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i`, names)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		i := 0
		for rows.Next() {
			var (
				key     string
				effects int
				hasRec  bool
			)
			if err := rows.Scan(&key, &effects, &hasRec); err != nil {
				t.Fatal(err)
			}
			mustHave := succeeded == nil || succeeded[i]
			switch {
			case effects > 1:
				t.Errorf("%s: %d effects, want at most 1 (duplicate)", key, effects)
			case (effects == 1) != hasRec:
				t.Errorf("%s: %d effects, record %v: effect and record must commit together", key, effects, hasRec)
			case mustHave && effects != 1:
				t.Errorf("%s: succeeded but has %d effects, record %v (lost)", key, effects, hasRec)
			}
			i++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if i != len(names) {
			t.Fatalf("verified %d keys, want %d", i, len(names))
		}
	}
	verify(succeeded)
	// The *sql.DB recovered: every key that succeeded is replayed, and
	// every other one runs now, once. (ErrInFlight is retried: the server
	// may not have reaped the last killed holder yet.)
	for i, key := range names {
		res, replayed, err := do(key, 200)
		if err != nil || (succeeded[i] && !replayed) || string(res.Body) != key {
			t.Fatalf("%s after the faults: body=%q replayed=%v err=%v, want its replay", key, res.Body, replayed, err)
		}
	}
	verify(nil)
}

package pgstoretest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// adminConn is a connection of the test's own to the server, closed at
// clean-up, for what the stores' connections cannot do (kill them).
func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pgtest.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// faultLoad drives keys through Guard.Do from several workers, each key
// retried until it succeeds, while disrupt breaks connections. It then
// checks the rules that must survive any fault:
//
//   - every key has either exactly one effect and its record, or neither
//     (E1: no duplicate effect, no effect without a record, no record
//     without an effect);
//   - every key whose Do succeeded has its effect and record (no lost
//     committed result);
//   - every failure matched ErrUnavailable (transient), ErrInFlight (the
//     server had not yet reaped a killed holder) or the work's own
//     transient fault;
//   - afterwards the same pool, never reopened, replays every key that
//     succeeded and runs every other one, once.
//
// Connections are never pinged before use: a connection killed while idle
// fails its next use, where it is counted, rather than being replaced
// silently.
type faultLoad struct {
	keys        int
	workers     int
	backoff     time.Duration
	keyDeadline time.Duration
	// untilDisrupted keeps feeding keys past keys (up to 20 times as many)
	// until the disruption has finished, so that on a fast machine the
	// faults still land in the middle of the load.
	untilDisrupted bool
}

type faultStats struct {
	unavailable, inFlight, workFault, ok atomic.Int64
}

// errWorkFault marks the work's own failures: the Guard returns the work's
// error as it is, so a fault that lands inside the work reaches the caller
// as the work's error, not as ErrUnavailable. It must still be a transient
// fault, and it must still have rolled everything back.
var errWorkFault = errors.New("the work failed")

func (fl faultLoad) run(t *testing.T, d Driver, app string, disrupt func(ctx context.Context)) *faultStats {
	t.Helper()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	e := open(t, d, Conn{SearchPath: schema, AppName: app, MaxConns: fl.workers, NoPing: true}, Config{Schema: schema})
	mustExec(t, e, `CREATE TABLE effects (name text NOT NULL)`)
	g := newGuard(t, e.Store, nil)
	work := func(key string) idem.Work {
		return func(ctx context.Context) (idem.Result, error) {
			if err := execIn(ctx, d, nil, `INSERT INTO effects (name) VALUES ($1)`, key); err != nil {
				return idem.Result{}, fmt.Errorf("%w: %w", errWorkFault, err)
			}
			// Widen the window in which a fault lands inside the work.
			if err := execIn(ctx, d, nil, `SELECT pg_sleep(0.001)`); err != nil {
				return idem.Result{}, fmt.Errorf("%w: %w", errWorkFault, err)
			}
			return idem.Result{Status: 201, Body: []byte(key)}, nil
		}
	}
	st := &faultStats{}
	// do runs key until it succeeds or its deadline passes, counting
	// each failure and reporting one that breaks the rules.
	do := func(key string, deadline time.Duration) (res idem.Result, replayed bool, err error) {
		end := time.Now().Add(deadline)
		for time.Now().Before(end) {
			// A deadline, as any real request has: a connection attempt
			// to a server that went away must not hang.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res, replayed, err = g.Do(ctx, idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, work(key))
			cancel()
			if err == nil {
				return res, replayed, nil
			}
			switch {
			case errors.Is(err, idem.ErrInFlight):
				st.inFlight.Add(1)
			case errors.Is(err, idem.ErrUnavailable) && d.Transient(err):
				st.unavailable.Add(1)
			case errors.Is(err, errWorkFault) && d.Transient(err):
				st.workFault.Add(1)
			default:
				t.Errorf("%s: %v, want a transient ErrUnavailable, ErrInFlight or the work's transient fault", key, err)
			}
			time.Sleep(fl.backoff)
		}
		return res, replayed, err
	}

	maxKeys := fl.keys
	if fl.untilDisrupted {
		maxKeys *= 20
	}
	keys := make([]string, maxKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%05d", i)
	}
	succeeded := make([]bool, len(keys))
	next := make(chan int)
	ctx, cancel := context.WithCancel(context.Background())
	disrupted := make(chan struct{})
	go func() {
		defer close(disrupted)
		disrupt(ctx)
	}()
	var wg sync.WaitGroup
	for range fl.workers {
		wg.Go(func() {
			for i := range next {
				res, _, err := do(keys[i], fl.keyDeadline)
				if err == nil {
					if string(res.Body) != keys[i] {
						t.Errorf("%s: body %q", keys[i], res.Body)
					}
					succeeded[i] = true
					st.ok.Add(1)
				}
			}
		})
	}
	fed := 0
feed:
	for i := range keys {
		if i >= fl.keys {
			select {
			case <-disrupted:
				break feed
			default:
			}
		}
		next <- i
		fed++
	}
	close(next)
	wg.Wait()
	cancel()
	<-disrupted
	keys, succeeded = keys[:fed], succeeded[:fed]

	// The invariants, read through the same pool.
	var verifyErr error
	for range 100 {
		if verifyErr = verifyKeys(t, e, keys, succeeded); verifyErr == nil || !d.Transient(verifyErr) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if verifyErr != nil {
		t.Fatal(verifyErr)
	}
	// The pool recovered: every key that succeeded is replayed, and every
	// other one runs now, once. A connection killed in the last instants
	// may still sit idle in the pool: its failure is retried, as a client
	// would, and counted.
	for i, key := range keys {
		res, replayed, err := do(key, fl.keyDeadline)
		if err != nil || (succeeded[i] && !replayed) || string(res.Body) != key {
			t.Fatalf("%s after the faults: body=%q replayed=%v err=%v, want its replay", key, res.Body, replayed, err)
		}
	}
	if err := verifyKeys(t, e, keys, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys: ok %d, unavailable %d, in flight %d, work faults %d", fed, st.ok.Load(), st.unavailable.Load(), st.inFlight.Load(), st.workFault.Load())
	return st
}

// verifyKeys checks each key's effects and record; with succeeded, keys
// whose Do succeeded must have both, and without, every key must.
func verifyKeys(t *testing.T, e *Env, keys []string, succeeded []bool) error {
	t.Helper()
	must := make([]bool, len(keys))
	for i := range must {
		must[i] = succeeded == nil || succeeded[i]
	}
	// One row, as both drivers scan it: the keys that break a rule, a
	// line each.
	var bad string
	err := e.DB.QueryRow(context.Background(), `
SELECT coalesce(string_agg(format('%s %s %s %s', k, effects, has_rec, must), E'\n' ORDER BY i), '')
FROM (
	SELECT u.k, u.i, u.must,
	       (SELECT count(*) FROM effects e WHERE e.name = u.k) AS effects,
	       EXISTS (SELECT FROM idem_records r WHERE r.scope = 's' AND r.key = u.k) AS has_rec
	FROM unnest($1::text[], $2::bool[]) WITH ORDINALITY AS u(k, must, i)
) AS c
WHERE effects > 1 OR (effects = 1) <> has_rec OR (must AND effects <> 1)`, keys, must).Scan(&bad)
	if err != nil {
		return err
	}
	for line := range strings.Lines(bad) {
		var (
			key           string
			effects       int
			hasRec, mustH bool
		)
		if _, err := fmt.Sscanf(line, "%s %d %t %t", &key, &effects, &hasRec, &mustH); err != nil {
			return fmt.Errorf("%q: %w", line, err)
		}
		switch {
		case effects > 1:
			t.Errorf("%s: %d effects, want at most 1 (duplicate)", key, effects)
		case (effects == 1) != hasRec:
			t.Errorf("%s: %d effects, record %v: effect and record must commit together", key, effects, hasRec)
		case mustH && effects != 1:
			t.Errorf("%s: succeeded but has %d effects, record %v (lost)", key, effects, hasRec)
		}
	}
	return nil
}

func testTerminatedBackendsUnderLoad(t *testing.T, d Driver) {
	// E1, E8 under faults: the test's own backends (picked by
	// application_name, since other tests run in parallel) are killed with
	// pg_terminate_backend, one every few milliseconds and only while they
	// are in a call, as eight workers run keys; the load goes on past its
	// 200 keys until ten have been killed, so that the faults land on a
	// busy machine too. faultLoad checks the rest. Nothing is timed: the
	// checks hold whenever the kills land.
	pgtest.Require(t)
	app := appName("pg-fault")
	admin := adminConn(t)
	var killed atomic.Int64
	const kills = 10
	st := faultLoad{keys: 200, workers: 8, backoff: 2 * time.Millisecond, keyDeadline: 20 * time.Second, untilDisrupted: true}.run(t, d, app, func(ctx context.Context) {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for killed.Load() < kills {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var n int64
			err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM (
	SELECT pid FROM pg_stat_activity
	WHERE application_name = $1 AND state IN ('active', 'idle in transaction')
	ORDER BY random() LIMIT 1) AS victims`, app).Scan(&n)
			if err == nil {
				killed.Add(n)
			}
		}
	})
	t.Logf("terminated %d backends", killed.Load())
	// A kill lands in the guard's own statements (ErrUnavailable) or in
	// the work's (its transient error); which one is down to timing.
	if landed := st.unavailable.Load() + st.workFault.Load(); killed.Load() < kills || landed == 0 {
		t.Errorf("terminated %d backends, %d failed calls: the faults did not land", killed.Load(), landed)
	}
}

// RestartEnv enables the ClusterRestartUnderLoad test. The restart breaks
// every other test that uses the server at the time, so the test runs
// only when asked, on its own:
//
//	IDEM_PG_RESTART_TEST=1 go test -run 'TestStore/ClusterRestartUnderLoad' ./pgstore/...
const RestartEnv = "IDEM_PG_RESTART_TEST"

func testClusterRestartUnderLoad(t *testing.T, d Driver) {
	// E1, E8 across a server restart (pg_ctlcluster … restart -m fast) in
	// the middle of the load: the same rules as above, and the pool, which
	// is never reopened, serves again once the server is back.
	if os.Getenv(RestartEnv) != "1" {
		t.Skipf("set %s=1 to restart the local cluster under load (it disturbs every other test using the server)", RestartEnv)
	}
	pgtest.Require(t)
	versions, err := filepath.Glob("/etc/postgresql/*/main")
	if err != nil || len(versions) == 0 {
		t.Fatalf("no cluster under /etc/postgresql: %v", err)
	}
	version := filepath.Base(filepath.Dir(versions[0]))
	var restarts atomic.Int64
	st := faultLoad{keys: 400, workers: 8, backoff: 50 * time.Millisecond, keyDeadline: 60 * time.Second, untilDisrupted: true}.run(t, d, appName("pg-restart"), func(ctx context.Context) {
		for range 2 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(400 * time.Millisecond):
			}
			cmd := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", "fast")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%v: %v\n%s", cmd.Args, err, out)
				return
			}
			restarts.Add(1)
		}
	})
	if restarts.Load() == 0 || st.unavailable.Load() == 0 {
		t.Errorf("%d restarts, %d unavailable answers: the faults did not land", restarts.Load(), st.unavailable.Load())
	}
}

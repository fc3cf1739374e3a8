package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// faultLoad drives keys through Guard.Do from several workers, each key
// retried until it succeeds, while disrupt breaks connections. It then
// checks the rules that must survive any fault:
//
//   - every key has either exactly one effect and its record, or neither
//     (E1: no duplicate effect, no effect without a record, no record
//     without an effect);
//   - every key whose Do succeeded has its effect and record (no lost
//     committed result);
//   - every failure matched ErrUnavailable (transient) or ErrInFlight;
//   - afterwards the same pool, never restarted, replays every key.
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

// errWorkFault marks the work's own failures: Guard returns the work's
// error as it is (the work runs the caller's statements), so a fault that
// lands inside the work reaches the caller as the work's error, not as
// ErrUnavailable. It must still be a transient fault, and it must still
// have rolled everything back.
var errWorkFault = errors.New("the work failed")

func (fl faultLoad) run(t *testing.T, appName string, disrupt func(ctx context.Context, pool *pgxpool.Pool)) *faultStats {
	t.Helper()
	pgtest.Require(t)
	schema := pgtest.SchemaName(t)
	pool := newPool(t, schema, appName, int32(fl.workers))
	s, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `CREATE TABLE effects (name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	work := func(key string) idem.Work {
		return func(ctx context.Context) (idem.Result, error) {
			tx, _ := pgstore.TxFrom(ctx)
			if _, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ($1)`, key); err != nil {
				return idem.Result{}, fmt.Errorf("%w: %w", errWorkFault, err)
			}
			// Widen the window in which a fault lands inside the work.
			if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.001)`); err != nil {
				return idem.Result{}, fmt.Errorf("%w: %w", errWorkFault, err)
			}
			return idem.Result{Status: 201, Body: []byte(key)}, nil
		}
	}

	st := &faultStats{}
	maxKeys := fl.keys
	if fl.untilDisrupted {
		maxKeys *= 20
	}
	keys := make([]string, maxKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%04d", i)
	}
	succeeded := make([]bool, len(keys))
	next := make(chan int)
	ctx, cancel := context.WithCancel(context.Background())
	disrupted := make(chan struct{})
	go func() {
		defer close(disrupted)
		disrupt(ctx, pool)
	}()

	var wg sync.WaitGroup
	for range fl.workers {
		wg.Go(func() {
			for i := range next {
				deadline := time.Now().Add(fl.keyDeadline)
				for time.Now().Before(deadline) {
					// A deadline, as any real request has: a connection
					// attempt to a server that went away must not hang.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					res, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: keys[i], Fingerprint: "fp"}, work(keys[i]))
					cancel()
					if err == nil {
						if string(res.Body) != keys[i] {
							t.Errorf("%s: body %q", keys[i], res.Body)
						}
						succeeded[i] = true
						st.ok.Add(1)
						break
					}
					switch {
					case errors.Is(err, idem.ErrInFlight):
						// The server has not yet noticed a killed
						// holder's connection.
						st.inFlight.Add(1)
					case errors.Is(err, idem.ErrUnavailable) && pgstore.Transient(err):
						st.unavailable.Add(1)
					case errors.Is(err, errWorkFault) && pgstore.Transient(err):
						st.workFault.Add(1)
					default:
						t.Errorf("%s: %v, want a transient ErrUnavailable, ErrInFlight or the work's transient fault", keys[i], err)
					}
					time.Sleep(fl.backoff)
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

	// The invariants, read with a fresh connection of the same pool.
	var verifyErr error
	for attempt := 0; attempt < 100; attempt++ {
		if verifyErr = verifyKeys(t, pool, keys, succeeded); verifyErr == nil || !pgstore.Transient(verifyErr) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if verifyErr != nil {
		t.Fatal(verifyErr)
	}
	// The pool recovered: every key is now replayed, none runs again. A
	// connection killed in the last instants may still sit idle in the
	// pool; its one failure is retried, as a client would.
	for i, key := range keys {
		var (
			res      idem.Result
			replayed bool
			err      error
		)
		for range 5 {
			res, replayed, err = g.Do(context.Background(), idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, work(key))
			if err == nil || !pgstore.Transient(err) {
				break
			}
		}
		if err != nil || (succeeded[i] && !replayed) || string(res.Body) != key {
			t.Fatalf("%s after the faults: body=%q replayed=%v err=%v, want its replay", key, res.Body, replayed, err)
		}
	}
	if err := verifyKeys(t, pool, keys, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("ok %d, unavailable %d, in flight %d, work faults %d", st.ok.Load(), st.unavailable.Load(), st.inFlight.Load(), st.workFault.Load())
	return st
}

// verifyKeys checks each key's effects and record; with succeeded, keys
// whose Do succeeded must have both, and without, every key must.
func verifyKeys(t *testing.T, pool *pgxpool.Pool, keys []string, succeeded []bool) error {
	i := 0
	rows, err := pool.Query(context.Background(), `
SELECT k, (SELECT count(*) FROM effects e WHERE e.name = k),
       EXISTS (SELECT FROM idem_records r WHERE r.scope = 's' AND r.key = k)
FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i`, keys)
	if err != nil {
		return err
	}
	var (
		key     string
		effects int
		hasRec  bool
	)
	_, err = pgx.ForEachRow(rows, []any{&key, &effects, &hasRec}, func() error {
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
		return nil
	})
	return err
}

func TestTerminatedBackendsUnderLoad(t *testing.T) {
	// E1, E8 under faults: backends are killed with pg_terminate_backend
	// every few milliseconds while eight workers run keys; no key gets a
	// duplicate or lost effect, every failure is a transient
	// ErrUnavailable (or ErrInFlight while the server reaps a dead
	// holder), and the pool serves again afterwards.
	t.Parallel()
	pgtest.Require(t)
	appName := "pgstore-fault-" + filepath.Base(pgtest.SchemaName(t))
	admin := newPool(t, "", "", 1)
	var killed atomic.Int64
	// The load goes on past its 200 keys until ten backends have been
	// killed, so that the faults land on a busy machine too.
	const kills = 10
	st := faultLoad{keys: 200, workers: 8, backoff: 2 * time.Millisecond, keyDeadline: 20 * time.Second, untilDisrupted: true}.run(t, appName, func(ctx context.Context, _ *pgxpool.Pool) {
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for killed.Load() < kills {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var n int64
			// Only this test's backends (other tests run in parallel),
			// only started ones, one a tick (killing every connection in its
			// start-up would starve the pool of any).
			err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM (
	SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state IS NOT NULL ORDER BY random() LIMIT 1) AS victims`, appName).Scan(&n)
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

// restartEnv enables TestClusterRestartUnderLoad. The restart breaks every
// other test that uses the server at the time, so the test runs only when
// asked, on its own: IDEM_PG_RESTART_TEST=1 go test -run TestClusterRestartUnderLoad ./pgstore/
const restartEnv = "IDEM_PG_RESTART_TEST"

func TestClusterRestartUnderLoad(t *testing.T) {
	// E1, E8 across a server restart (pg_ctlcluster … restart -m fast) in
	// the middle of the load: the same rules as above, and the pool, which
	// is never recreated, serves again once the server is back.
	if os.Getenv(restartEnv) != "1" {
		t.Skipf("set %s=1 to restart the local cluster under load (it disturbs every other test using the server)", restartEnv)
	}
	pgtest.Require(t)
	versions, err := filepath.Glob("/etc/postgresql/*/main")
	if err != nil || len(versions) == 0 {
		t.Fatalf("no cluster under /etc/postgresql: %v", err)
	}
	version := filepath.Base(filepath.Dir(versions[0]))
	var restarts atomic.Int64
	st := faultLoad{keys: 400, workers: 8, backoff: 50 * time.Millisecond, keyDeadline: 60 * time.Second, untilDisrupted: true}.run(t, "pgstore-restart", func(ctx context.Context, _ *pgxpool.Pool) {
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

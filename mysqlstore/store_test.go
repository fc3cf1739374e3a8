package mysqlstore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/faultproxy"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/mysqlstore"
)

func open(t testing.TB, dsn string, cfg *mysqlstore.Config) *mysqlstore.Store {
	t.Helper()
	s, err := openWithEffects(context.Background(), dsn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openNew is New on a *sql.DB of the test's over dsn, closed at clean-up,
// with the effects table.
func openNew(t testing.TB, dsn string, cfg *mysqlstore.Config) *mysqlstore.Store {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := mysqlstore.New(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS effects (name VARBINARY(255) NOT NULL) ENGINE = InnoDB`); err != nil {
		t.Fatal(err)
	}
	return s
}

func count(t testing.TB, s *mysqlstore.Store, name string) int {
	t.Helper()
	n, err := countEffects(context.Background(), s, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func work(name string, res idem.Result) idem.Work {
	return func(ctx context.Context) (idem.Result, error) { return res, effect(ctx, name) }
}

func guard(t testing.TB, s idem.Store) *idem.Guard {
	t.Helper()
	g, err := idem.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A host that vanishes (no reset, no close: its packets go into a hole)
// while its work holds a key frees the key once the server's wait_timeout,
// which Begin set to Config.IdleTimeout, ends its session; until then a
// retry is refused at once, never queued behind the lock.
func TestVanishedHostIsBounded(t *testing.T) {
	mysqltest.Require(t)
	_, dsn := mysqltest.Database(t)
	const bound = 2 * time.Second
	hole := faultproxy.New(t, strings.TrimSuffix(strings.TrimPrefix(dsnAddr(t, dsn), "tcp("), ")"))
	far := open(t, mysqltest.WithAddr(t, dsn, hole.Addr()), &mysqlstore.Config{IdleTimeout: bound, ProbeConns: -1})
	t.Cleanup(hole.Resume)
	near := open(t, dsn, nil)
	ctx := context.Background()
	req := idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}
	between, goOn := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		_, _, err := guard(t, far).Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
			if err := effect(ctx, "abandoned"); err != nil {
				return idem.Result{}, err
			}
			close(between)
			<-goOn
			return idem.Result{Status: 201}, effect(ctx, "late")
		})
		done <- err
	}()
	<-between
	hole.Hold()
	close(goOn)
	g := guard(t, near)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second) // turns a wait on the lock into a failure
	_, _, err := g.Do(rctx, req, work("near", idem.Result{Status: 201}))
	cancel()
	if !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("a retry while the vanished host holds the key: %v, want ErrInFlight", err)
	}
	start := time.Now()
	for {
		_, _, err := g.Do(ctx, req, work("near", idem.Result{Status: 201}))
		if err == nil {
			break
		}
		if !errors.Is(err, idem.ErrInFlight) {
			t.Fatalf("retry: %v", err)
		}
		if time.Since(start) > bound+30*time.Second {
			t.Fatalf("the key is still held %s after the host vanished (IdleTimeout %s)", time.Since(start), bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the key was free again %s after the host vanished (IdleTimeout %s)", time.Since(start).Round(time.Millisecond), bound)
	hole.Resume()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the vanished host's call succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the vanished host's call never returned")
	}
	for name, want := range map[string]int{"abandoned": 0, "late": 0, "near": 1} {
		if n := count(t, near, name); n != want {
			t.Errorf("effects %q = %d, want %d", name, n, want)
		}
	}
}

func dsnAddr(t testing.TB, dsn string) string {
	t.Helper()
	at := strings.Index(dsn, "@")
	slash := strings.Index(dsn[at:], "/")
	if at < 0 || slash < 0 {
		t.Fatalf("cannot find the address in %q", dsn)
	}
	return dsn[at+1 : at+slash]
}

// A COMMIT that hangs does not hold the caller past its deadline: Commit
// fails with ErrUnavailable, the key stays refused while the COMMIT is in
// the air, and then ends up replayed (it committed) or free (it failed),
// never stuck.
func TestCommitEndsAtTheCallersDeadline(t *testing.T) {
	mysqltest.Require(t)
	for _, tt := range []struct {
		name       string
		outcome    error
		wantRecord bool
	}{
		{"CommitsLate", nil, true},
		{"FailsLate", errors.New("fsync failed"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, dsn := mysqltest.Database(t)
			s := open(t, dsn, nil)
			ctx := context.Background()
			wake, hung := make(chan struct{}), make(chan struct{}, 1)
			mysqlstore.SetCommitHook(s, func() error {
				hung <- struct{}{}
				<-wake
				return tt.outcome
			})
			var once sync.Once
			wakeUp := func() { once.Do(func() { close(wake) }) }
			defer wakeUp()
			now := time.Now()
			p := &idem.BeginParams{Scope: "s", Key: "k", Now: now}
			_, tx, err := s.Begin(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := effect(idem.WithTx(ctx, tx), "late"); err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			err = tx.Commit(cctx, &idem.CommitParams{Now: now, Record: &idem.Record{Scope: "s", Key: "k", Fingerprint: "fp",
				State: idem.StateCompleted, Result: idem.Result{Status: 201}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}})
			cancel()
			<-hung
			if !errors.Is(err, idem.ErrUnavailable) {
				t.Fatalf("Commit past its deadline: %v, want ErrUnavailable", err)
			}
			if _, tx2, err := s.Begin(ctx, p); !errors.Is(err, idem.ErrInFlight) {
				if tx2 != nil {
					_ = tx2.Rollback(ctx)
				}
				t.Fatalf("Begin while the COMMIT hangs: %v, want ErrInFlight", err)
			}
			wakeUp()
			for i := 0; ; i++ {
				rec, tx2, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k", Now: time.Now()})
				if errors.Is(err, idem.ErrInFlight) && i < 300 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if tx2 != nil {
					_ = tx2.Rollback(ctx)
				}
				if got := rec != nil; got != tt.wantRecord {
					t.Errorf("after the COMMIT ended: record %v, want %v", got, tt.wantRecord)
				}
				break
			}
			want := 0
			if tt.wantRecord {
				want = 1
			}
			if n := count(t, s, "late"); n != want {
				t.Errorf("effects = %d, want %d", n, want)
			}
		})
	}
}

// With every connection held by a slow work, a replay and the refusal of a
// key in flight are answered on the ProbeDB while the works still hold the
// pool; a new key waits for its turn and runs.
func TestStarvedPool(t *testing.T) {
	mysqltest.Require(t)
	_, dsn := mysqltest.Database(t)
	const works = 2
	s := open(t, dsn, nil)
	s.DB().SetMaxOpenConns(works)
	g := guard(t, s)
	ctx := context.Background()
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "done", Fingerprint: "fp"}, work("done", idem.Result{Status: 201})); err != nil {
		t.Fatal(err)
	}
	release, entered, slow := make(chan struct{}), make(chan struct{}, works), make(chan error, works)
	for i := range works {
		go func() {
			_, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: fmt.Sprint("slow", i), Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
				if err := effect(ctx, "slow"); err != nil {
					return idem.Result{}, err
				}
				entered <- struct{}{}
				<-release
				return idem.Result{Status: 201}, nil
			})
			slow <- err
		}()
	}
	for range works {
		<-entered
	}
	type answer struct {
		what     string
		replayed bool
		err      error
	}
	answers := make(chan answer, 2)
	go func() {
		_, replayed, err := g.Do(ctx, idem.Request{Scope: "s", Key: "done", Fingerprint: "fp"}, work("again", idem.Result{Status: 201}))
		answers <- answer{"replay", replayed, err}
	}()
	go func() {
		_, replayed, err := g.Do(ctx, idem.Request{Scope: "s", Key: "slow0", Fingerprint: "fp"}, work("again", idem.Result{Status: 201}))
		answers <- answer{"refusal", replayed, err}
	}()
	fresh := make(chan error, 1)
	go func() {
		_, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "new", Fingerprint: "fp"}, work("new", idem.Result{Status: 201}))
		fresh <- err
	}()
	for range 2 {
		select {
		case a := <-answers:
			switch {
			case a.what == "replay" && (a.err != nil || !a.replayed):
				t.Errorf("replay of a completed key: replayed=%v err=%v", a.replayed, a.err)
			case a.what == "refusal" && !errors.Is(a.err, idem.ErrInFlight):
				t.Errorf("retry of a key in flight: %v, want ErrInFlight", a.err)
			}
		case <-time.After(time.Minute):
			close(release)
			t.Fatal("a replay or a refusal waited behind the slow works")
		}
	}
	close(release)
	for range works {
		if err := <-slow; err != nil {
			t.Errorf("slow work: %v", err)
		}
	}
	if err := <-fresh; err != nil {
		t.Errorf("a new key while the pool was held: %v", err)
	}
	for name, want := range map[string]int{"slow": works, "new": 1, "again": 0} {
		if n := count(t, s, name); n != want {
			t.Errorf("effects %q = %d, want %d", name, n, want)
		}
	}
}

// Processes that start together on a new database migrate it once.
func TestMigrateConcurrently(t *testing.T) {
	mysqltest.Require(t)
	_, dsn := mysqltest.Database(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := mysqlstore.Open(context.Background(), dsn, &mysqlstore.Config{Table: "raced"})
			if err == nil {
				err = s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	s := open(t, dsn, &mysqlstore.Config{Table: "raced"})
	var n int
	if err := s.DB().QueryRow("SELECT COUNT(*) FROM raced_migrations").Scan(&n); err != nil || n != mysqlstore.LatestVersion() {
		t.Errorf("migrations recorded = %d (%v), want %d, each once", n, err, mysqlstore.LatestVersion())
	}
}

// Scopes, keys, bodies and headers come back byte for byte: utf8mb4 text
// and every byte value.
func TestBinarySafe(t *testing.T) {
	mysqltest.Require(t)
	_, dsn := mysqltest.Database(t)
	s := open(t, dsn, nil)
	body := make([]byte, 256)
	for i := range body {
		body[i] = byte(i)
	}
	scope := "tenant-ü-🙂-\u00a0x"
	res := idem.Result{Status: 201, Header: map[string][]string{"X-Émoji": {"🙂", "a\x01b"}}, Body: body}
	g := guard(t, s)
	ctx := context.Background()
	if _, _, err := g.Do(ctx, idem.Request{Scope: scope, Key: "K-1", Fingerprint: "fp-ü"}, work("bin", res)); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: scope, Key: "K-1"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Scope != scope || !bytes.Equal(rec.Result.Body, body) || rec.Result.Header["X-Émoji"][0] != "🙂" || rec.Result.Header["X-Émoji"][1] != "a\x01b" || rec.Fingerprint != "fp-ü" {
		t.Errorf("Lookup = %+v", rec)
	}
	// The same key in a scope that differs only by case or accent is
	// another record: comparisons are binary.
	if _, err := s.Lookup(ctx, &idem.LookupParams{Scope: strings.ToUpper(scope), Key: "K-1"}); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup in the upper-cased scope: %v, want ErrNotFound", err)
	}
	if _, err := s.Lookup(ctx, &idem.LookupParams{Scope: scope, Key: "k-1"}); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("Lookup of the lower-cased key: %v, want ErrNotFound", err)
	}
}

func TestConfigValidate(t *testing.T) {
	mysqltest.Require(t)
	_, dsn := mysqltest.Database(t)
	ctx := context.Background()
	if _, err := mysqlstore.Open(ctx, dsn, &mysqlstore.Config{Table: strings.Repeat("t", 60)}); err == nil {
		t.Error("a table name MySQL cannot hold with its suffixes: nil error")
	}
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mc.DBName = ""
	noDB := mc.FormatDSN()
	if _, err := mysqlstore.Open(ctx, noDB, nil); err == nil || !strings.Contains(err.Error(), "no database") {
		t.Errorf("Open without a database: %v, want an error saying so", err)
	}
	s := open(t, dsn, &mysqlstore.Config{Database: "idem_other_" + fmt.Sprint(time.Now().UnixNano()%1e9)})
	t.Cleanup(func() { _, _ = s.DB().Exec("DROP DATABASE " + "`" + s.Database() + "`") })
	if _, _, err := guard(t, s).Do(ctx, idem.Request{Key: "k"}, func(context.Context) (idem.Result, error) { return idem.Result{Status: 200}, nil }); err != nil {
		t.Errorf("a store in a database of its own: %v", err)
	}
}

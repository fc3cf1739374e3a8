package mysqlstore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/mysqlstore"
)

// Statements the client sent on the pool's one connection while do ran
// (MySQL's Questions counts neither those inside a procedure nor, here,
// the SHOW that reads it).
func statements(t *testing.T, db *sql.DB, do func()) int {
	t.Helper()
	read := func() int {
		var name string
		var n int
		if err := db.QueryRow("SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := read()
	do()
	return read() - before - 1
}

// A first execution costs the work's statement (one here) and two of the store's
// on Open's connections (a CALL begins the transaction, a CALL commits
// it), four on a *sql.DB of yours (database/sql's START TRANSACTION and
// COMMIT around them), and eight, one by one, where the account may not
// create the procedures. A replay costs one CALL on Open's connections.
func TestStatementsOfAFirstExecution(t *testing.T) {
	mysqltest.Require(t)
	ctx := context.Background()
	for _, tt := range []struct {
		path          string
		open          func(t *testing.T) (*mysqlstore.Store, *sql.DB)
		first, replay int
	}{
		{"deferred", func(t *testing.T) (*mysqlstore.Store, *sql.DB) {
			_, dsn := mysqltest.Database(t)
			s := open(t, interpolate(t, dsn), &mysqlstore.Config{ProbeConns: -1})
			return s, s.DB()
		}, 3, 1},
		{"procedures", func(t *testing.T) (*mysqlstore.Store, *sql.DB) {
			_, dsn := mysqltest.Database(t)
			s := openNew(t, interpolate(t, dsn), nil)
			return s, s.DB()
		}, 5, 3},
		{"statements", func(t *testing.T) (*mysqlstore.Store, *sql.DB) {
			_, dsn := mysqltest.Database(t)
			s := open(t, interpolate(t, mysqltest.WithoutRoutines(t, dsn)), &mysqlstore.Config{ProbeConns: -1})
			return s, s.DB()
		}, 9, 3},
	} {
		t.Run(tt.path, func(t *testing.T) {
			s, db := tt.open(t)
			if got := mysqlstore.Path(s); got != tt.path {
				t.Fatalf("the store runs atomic work by %s, want %s", got, tt.path)
			}
			db.SetMaxOpenConns(1)
			g, err := idem.New(s, &idem.Config{ReplayCacheBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			do := func() {
				if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, work("e", idem.Result{Status: 201})); err != nil {
					t.Fatal(err)
				}
			}
			if n := statements(t, db, do); n != tt.first {
				t.Errorf("a first execution sent %d statements, want %d", n, tt.first)
			}
			if n := statements(t, db, do); n != tt.replay {
				t.Errorf("a replay sent %d statements, want %d", n, tt.replay)
			}
			if n := count(t, s, "e"); n != 1 {
				t.Errorf("effects = %d, want 1", n)
			}
		})
	}
}

// A store opened on tables whose procedures are missing (an account that
// may not create them, an older release's migrations) works by
// statements, and picks the procedures up once a store that may has
// created them.
func TestProceduresCreatedLater(t *testing.T) {
	mysqltest.Require(t)
	_, dsn := mysqltest.Database(t)
	limited := open(t, mysqltest.WithoutRoutines(t, dsn), nil)
	if got := mysqlstore.Path(limited); got != "statements" {
		t.Fatalf("without CREATE ROUTINE: %s, want statements", got)
	}
	full := open(t, dsn, nil)
	if got := mysqlstore.Path(full); got != "deferred" {
		t.Fatalf("with CREATE ROUTINE: %s, want deferred", got)
	}
	// Both work on one table, side by side: one key each, then each
	// replays the other's.
	ctx := context.Background()
	stores := []*mysqlstore.Store{limited, full}
	for i, s := range stores {
		key := fmt.Sprint("k", i)
		if _, _, err := guard(t, s).Do(ctx, idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, work(key, idem.Result{Status: 201 + i})); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range stores {
		g := guard(t, s)
		for k := range stores {
			key := fmt.Sprint("k", k)
			res, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, work(key, idem.Result{Status: 500}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != 201+k {
				t.Errorf("store %d, key %s: status %d, want %d (a replay)", i, key, res.Status, 201+k)
			}
		}
	}
	for k := range stores {
		if n := count(t, full, fmt.Sprint("k", k)); n != 1 {
			t.Errorf("effects of k%d = %d, want 1", k, n)
		}
	}
}

// interpolate is dsn with interpolateParams: the work's statements are
// one round trip each.
func interpolate(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	return cfg.FormatDSN()
}

// A procedure of the user's that bears the name of one of the store's is
// neither replaced nor called: the store sends its statements.
func TestProcedureOfTheSameNameLeftAlone(t *testing.T) {
	mysqltest.Require(t)
	name, dsn := mysqltest.Database(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE PROCEDURE `" + name + "`.idem_records_begin () SELECT 1"); err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn, nil)
	if got := mysqlstore.Path(s); got != "statements" {
		t.Fatalf("beside a procedure of the user's named as the store's: %s, want statements", got)
	}
	if _, _, err := guard(t, s).Do(context.Background(), idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, work("k", idem.Result{Status: 201})); err != nil {
		t.Fatal(err)
	}
	var body string
	if err := db.QueryRow("SELECT ROUTINE_DEFINITION FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = 'idem_records_begin'", name).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if body != "SELECT 1" {
		t.Errorf("the user's procedure became %q", body)
	}
}

// An account that sees the store's procedures but may not execute them
// (EXECUTE revoked, the tables and procedures migrated by another
// account) is served by statements: its first CALL is refused, nothing
// of it ran, and the store goes on without its procedures. (Its own
// Migrate would get it EXECUTE: MariaDB grants a routine's creator its
// privileges on CREATE PROCEDURE IF NOT EXISTS of one that exists.)
func TestProceduresWithoutExecute(t *testing.T) {
	mysqltest.Require(t)
	_, dsn := mysqltest.Database(t)
	open(t, dsn, nil) // creates the procedures
	for _, path := range []string{"deferred", "procedures"} {
		t.Run(path, func(t *testing.T) {
			limited := mysqltest.WithoutExecute(t, dsn)
			cfg := &mysqlstore.Config{SkipMigrate: true}
			var s *mysqlstore.Store
			if path == "deferred" {
				s = open(t, limited, cfg)
			} else {
				s = openNew(t, limited, cfg)
			}
			if got := mysqlstore.Path(s); got != path {
				t.Fatalf("the procedures are visible, so the store starts on %s; got %s", path, got)
			}
			g := guard(t, s)
			for i := range 2 {
				key := path + fmt.Sprint(i)
				if _, _, err := g.Do(context.Background(), idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, work(key, idem.Result{Status: 201})); err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if n := count(t, s, key); n != 1 {
					t.Errorf("%s: %d effects, want 1", key, n)
				}
			}
			if got := mysqlstore.Path(s); got != "statements" {
				t.Errorf("after a refused CALL the store runs by %s, want statements", got)
			}
		})
	}
}

// Procedures dropped under a running store (an operator's clean-up, a
// restore without routines): a Begin that finds the begin procedure gone
// goes on by statements, and so does a Commit that finds the commit
// procedure gone after its Begin ran by CALL; neither is reported as the
// work ending the transaction, in English or in a language whose message
// is worded otherwise (the same error number means a missing savepoint).
func TestProceduresDroppedUnderARunningStore(t *testing.T) {
	mysqltest.Require(t)
	ctx := context.Background()
	drop := func(t *testing.T, db *sql.DB, procs ...string) {
		t.Helper()
		for _, p := range procs {
			if _, err := db.Exec("DROP PROCEDURE " + p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, lang := range []string{"en_US", "zh_CN"} {
		speaking := func(dsn string) string { return withParam(t, dsn, "lc_messages", "'"+lang+"'") }
		t.Run(lang+"/BeforeCommit", func(t *testing.T) {
			_, dsn := mysqltest.Database(t)
			s := open(t, speaking(dsn), nil)
			admin := open(t, dsn, nil).DB()
			res, _, err := guard(t, s).Do(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
				drop(t, admin, "idem_records_commit")
				return idem.Result{Status: 201}, effect(ctx, "k")
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != 201 || count(t, s, "k") != 1 {
				t.Fatalf("status %d, %d effects; want 201 and 1", res.Status, count(t, s, "k"))
			}
			if got := mysqlstore.Path(s); got != "statements" {
				t.Errorf("after the commit procedure was dropped: %s, want statements", got)
			}
			// The record is there: a retry is a replay.
			res, _, err = guard(t, s).Do(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, work("k", idem.Result{Status: 500}))
			if err != nil || res.Status != 201 || count(t, s, "k") != 1 {
				t.Fatalf("the retry: status %d, %v, %d effects; want a replay of 201 and 1 effect", res.Status, err, count(t, s, "k"))
			}
		})
		t.Run(lang+"/BeforeBegin", func(t *testing.T) {
			_, dsn := mysqltest.Database(t)
			s := open(t, speaking(dsn), nil)
			drop(t, s.DB(), "idem_records_begin", "idem_records_commit")
			if _, _, err := guard(t, s).Do(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, work("k", idem.Result{Status: 201})); err != nil {
				t.Fatal(err)
			}
			if n := count(t, s, "k"); n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
			if got := mysqlstore.Path(s); got != "statements" {
				t.Errorf("after the procedures were dropped: %s, want statements", got)
			}
		})
	}
}

// A procedure of the store's name and comment prefix whose body is
// another (an earlier body, whose sixth argument meant "START
// TRANSACTION here") is never called: the store finds it by its exact
// comment, misses it, and sends its statements. Called with today's
// arguments, that body would run the work outside any transaction.
func TestProcedureOfAnotherBodyIsNotCalled(t *testing.T) {
	mysqltest.Require(t)
	_, dsn := mysqltest.Database(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(earlierBeginBody); err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn, nil)
	if got := mysqlstore.Path(s); got != "statements" {
		t.Fatalf("beside a begin procedure of another body: %s, want statements", got)
	}
	ctx := context.Background()
	g := guard(t, s)
	failed := errors.New("insufficient funds")
	_, _, err = g.Do(ctx, idem.Request{Scope: "s", Key: "k", Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
		if err := effect(ctx, "debit"); err != nil {
			return idem.Result{}, err
		}
		return idem.Result{}, failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("Do: %v, want the work's error", err)
	}
	if n := count(t, s, "debit"); n != 0 {
		t.Errorf("a work that failed left %d effects, want 0", n)
	}
	if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: "k2", Fingerprint: "fp"}, work("debit2", idem.Result{Status: 201})); err != nil || count(t, s, "debit2") != 1 {
		t.Errorf("a work that succeeded: %v, %d effects; want 1", err, count(t, s, "debit2"))
	}
}

// earlierBeginBody is the begin procedure as an earlier commit wrote it.
const earlierBeginBody = "CREATE PROCEDURE idem_records_begin (p_lock VARBINARY(64), p_scope VARBINARY(255), p_key VARBINARY(255), p_now BIGINT, p_wait INT, p_start BOOL)\n" +
	"	MODIFIES SQL DATA SQL SECURITY INVOKER\n" +
	"	COMMENT 'idem mysqlstore: Begin (the key''s lock, its record, the savepoint)'\n" +
	"BEGIN\n" +
	"	DECLARE v_locked INT DEFAULT NULL;\n" +
	"	DECLARE v_live INT DEFAULT 0;\n" +
	"	SET v_locked = GET_LOCK(p_lock, 0);\n" +
	"	IF v_locked = 1 THEN\n" +
	"		SELECT COUNT(*) INTO v_live FROM idem_records WHERE scope = p_scope AND `key` = p_key AND (state = 'pending' OR expires_at > p_now);\n" +
	"		IF v_live > 0 THEN\n" +
	"			DO RELEASE_LOCK(p_lock);\n" +
	"		ELSE\n" +
	"			IF p_start THEN\n" +
	"				START TRANSACTION;\n" +
	"			END IF;\n" +
	"			SAVEPOINT idem_begin;\n" +
	"		END IF;\n" +
	"	END IF;\n" +
	"	SELECT v_locked, v_live, r.fingerprint, r.state, r.status, r.headers, r.body, r.created_at, r.expires_at, r.token, r.lease_until, r.kind, r.input, r.attempts, r.last_error, r.ttl_us FROM (SELECT 1) AS d LEFT JOIN idem_records AS r ON r.scope = p_scope AND r.`key` = p_key;\n" +
	"END"

// Connections whose sessions would leave the store's statements
// uncommitted are refused, by Open and by New: autocommit=0 (a DELETE of
// the sweeper never commits, Begin reads an old snapshot) and
// completion_type CHAIN (a COMMIT leaves a transaction open).
func TestSessionsThatDoNotCommitAreRefused(t *testing.T) {
	mysqltest.Require(t)
	ctx := context.Background()
	_, dsn := mysqltest.Database(t)
	for _, tt := range []struct{ param, value, want string }{
		{"autocommit", "0", "autocommit=0"},
		{"completion_type", "'CHAIN'", "completion_type=CHAIN"},
		// Without a strict mode, headers too long for their column are
		// cut short and committed: a record that cannot be read back.
		{"sql_mode", "''", "neither STRICT_TRANS_TABLES nor STRICT_ALL_TABLES"},
	} {
		t.Run(tt.param, func(t *testing.T) {
			bad := withParam(t, dsn, tt.param, tt.value)
			if s, err := mysqlstore.Open(ctx, bad, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				if s != nil {
					s.Close()
				}
				t.Errorf("Open with %s=%s: %v, want an error naming %s", tt.param, tt.value, err, tt.want)
			}
			db, err := sql.Open("mysql", bad)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := mysqlstore.New(ctx, db, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New with %s=%s: %v, want an error naming %s", tt.param, tt.value, err, tt.want)
			}
		})
	}
}

// withParam is dsn with the session variable name set to value on each
// connection.
func withParam(t *testing.T, dsn, name, value string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[name] = value
	return cfg.FormatDSN()
}

// The procedures' bodies are pinned: a store finds its procedures by name
// and COMMENT and never replaces one that exists (CREATE PROCEDURE … IF
// NOT EXISTS), so a body changed under the same name and comment would
// be skipped on every database migrated before, and the old body called
// with the new code's arguments. A changed body needs new names
// (beginSuffix, commitSuffix) and comments (beginComment, commitComment);
// then update the digest here.
func TestProcedureBodiesArePinned(t *testing.T) {
	sum := sha256.Sum256([]byte(strings.Join(mysqlstore.ProcedureStatements("d", "t"), "\n")))
	const want = "de0b3891c7da30cd89cf0af570527635d07efb9e225a47e06dbe472ea8595a48"
	if got := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("the procedures' CREATE statements have digest %s, want %s: a body that changes gets new names and comments (procedure.go)", got, want)
	}
}

// Routine names compare case- and accent-insensitively, table names byte
// for byte: the procedures of the table `Orders` also answer to
// orders_begin. A store on `orders` must not call them (they read and
// write `Orders`: it would replay the other store's records); it runs its
// statements one by one.
func TestStoresWhoseTablesDifferInCaseKeepTheirRecordsApart(t *testing.T) {
	mysqltest.Require(t)
	ctx := context.Background()
	for _, pair := range [][2]string{{"Orders", "orders"}, {"café", "cafe"}} {
		t.Run(pair[1], func(t *testing.T) {
			_, dsn := mysqltest.Database(t)
			first := open(t, dsn, &mysqlstore.Config{Table: pair[0]})
			second := open(t, dsn, &mysqlstore.Config{Table: pair[1]})
			if got := mysqlstore.Path(first); got != "deferred" {
				t.Fatalf("the store on %q runs %s, want its procedures", pair[0], got)
			}
			if got := mysqlstore.Path(second); got != "statements" {
				t.Errorf("the store on %q runs %s, want its statements: the procedures of that name are %q's", pair[1], got, pair[0])
			}
			now := time.Now()
			for _, s := range []*mysqlstore.Store{first, second} {
				rec, tx, err := s.Begin(ctx, &idem.BeginParams{Scope: "s", Key: "k1", Now: now})
				if err != nil || rec != nil || tx == nil {
					t.Fatalf("Begin on %s: %v, %+v: want a new key, not another store's record", s.Table(), err, rec)
				}
				err = tx.Commit(ctx, &idem.CommitParams{Now: now, Record: &idem.Record{Scope: "s", Key: "k1", State: idem.StateCompleted,
					Result: idem.Result{Status: 200, Body: []byte("of " + s.Table())}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}})
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range []*mysqlstore.Store{first, second} {
				rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s", Key: "k1"})
				if err != nil || rec == nil || string(rec.Result.Body) != "of "+s.Table() {
					t.Errorf("Lookup on %s: %v, %+v", s.Table(), err, rec)
				}
			}
		})
	}
}

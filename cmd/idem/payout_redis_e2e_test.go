package main

import (
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/cmd/idem/internal/fakeprovider"
	"github.com/idemkit/idem/internal/redistest"
)

// A redis:// -db keeps the payouts' leased records only: idem serve and
// idem complete without a SQL -ledger, idem serve without -provider, a
// -ledger that is not SQL or without Redis, and the commands that work on
// the SQL database only are refused with exit status 2 and say why.
func TestRedisDBUsage(t *testing.T) {
	t.Parallel()
	const rdb = "redis://127.0.0.1:6379/0"
	file := filepath.Join(t.TempDir(), "ledger.db")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"ServeWithoutProvider", []string{"serve", "-db", rdb},
			[]string{"leased-mode records only", "no payouts without -provider", "transfers service needs SQL", "atomic records of POST /transfers", "postgres://"}},
		{"ServeWithoutProviderWithLedger", []string{"serve", "-db", rdb, "-ledger", file},
			[]string{"no payouts without -provider"}},
		{"LedgerWithoutRedis", []string{"serve", "-db", file, "-ledger", file},
			[]string{"-ledger applies only with a redis:// -db"}},
		{"LedgerOnRedis", []string{"serve", "-db", rdb, "-ledger", rdb, "-provider", "http://127.0.0.1:1"},
			[]string{"-ledger must be a SQL database"}},
		{"EmptyPrefix", []string{"serve", "-db", rdb + "?prefix=", "-ledger", file, "-provider", "http://127.0.0.1:1"},
			[]string{"?prefix= is empty"}},
		{"PasswordHidden", []string{"serve", "-db", "redis://user:secret@127.0.0.1:6379/0"},
			[]string{"redis://user:xxxxx@127.0.0.1:6379/0"}},
		{"Sweep", []string{"sweep", "-db", rdb}, []string{"is a Redis server", "Redis expires its own"}},
		{"Inspect", []string{"inspect", "-db", rdb, "anonymous", "k"}, []string{"is a Redis server", "SQL database"}},
		{"Import", []string{"import", "-db", rdb, file}, []string{"is a Redis server", "ledger"}},
		{"Bench", []string{"bench", "-db", rdb}, []string{"is a Redis server", "SQL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command(binary, tc.args...).CombinedOutput()
			if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 2 {
				t.Fatalf("%v: %v %s, want exit status 2", tc.args, err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%v: %s\nwant it to say %q", tc.args, out, w)
				}
			}
			if strings.Contains(string(out), "secret") {
				t.Errorf("%v: the password shows: %s", tc.args, out)
			}
		})
	}
	if _, err := os.Stat(file); err == nil {
		t.Errorf("a refused command created %s", file)
	}
}

// With -db redis:// -ledger FILE, POST /transfers keeps its atomic records
// in the ledger's database and the payouts keep theirs in Redis, under the
// -db's ?prefix=; idem complete with the same -db and -ledger finishes a
// payout whose process was killed during the provider call.
func TestPayoutE2ERedisComplete(t *testing.T) {
	t.Parallel()
	rdb := redisDB(t)
	ledger := filepath.Join(t.TempDir(), "ledger.db")
	db := []string{"-db", rdb, "-ledger", ledger}
	prov, purl := fakeprovider.Start(t, nil)
	const key = "redis-complete"
	crashPayout(t, db, purl, prov, key, "during")

	u, err := url.Parse(rdb)
	if err != nil {
		t.Fatal(err)
	}
	prefix := u.Query().Get("prefix")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, err := redistest.Client(t).Keys(ctx, "{"+prefix+":*}:rec").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("Redis keys of the payout's record under prefix %s: %v (%v), want one", prefix, keys, err)
	}

	time.Sleep(2500 * time.Millisecond) // the dead holder's 2s lease ends
	out, err := exec.Command(binary, append([]string{"complete"}, append(db, "-provider", purl, "-lease", "2s")...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "found 1 abandoned record(s): 1 completed") {
		t.Fatalf("idem complete: %v\n%s", err, out)
	}
	s := startServe(t, append(db, "-provider", purl, "-complete-interval", "1h")...)
	checkReconciled(t, s, prov, key)
	if status, body := s.do(t, "POST", "/payouts", key, payoutBody()); status != 201 {
		t.Fatalf("retry after idem complete: %d %s, want the completed payout replayed", status, body)
	}

	// POST /transfers: atomic mode, in the ledger's database.
	if status, body := s.do(t, "PUT", "/accounts/bob", "", `{"balance":0}`); status != 200 {
		t.Fatalf("PUT /accounts/bob: %d %s", status, body)
	}
	const transfer = `{"from":"alice","to":"bob","amount":50}`
	st1, first := s.do(t, "POST", "/transfers", "xfer-key", transfer)
	st2, again := s.do(t, "POST", "/transfers", "xfer-key", transfer)
	if st1 != 201 || st2 != 201 || again != first {
		t.Fatalf("transfer %d %s, retry %d %s: want one 201 replayed", st1, first, st2, again)
	}
	if got := s.balance(t, "alice"); got != 1000-payoutAmount-50 {
		t.Fatalf("alice's balance %d, want %d", got, 1000-payoutAmount-50)
	}
	if keys, err := redistest.Client(t).Keys(ctx, "*"+prefix+"*").Result(); err != nil || len(keys) == 0 {
		t.Fatalf("keys under prefix %s: %v (%v)", prefix, keys, err)
	} else {
		for _, k := range keys {
			if strings.Contains(k, "xfer-key") {
				t.Fatalf("the transfer's record %q is in Redis, want it in the ledger's database", k)
			}
		}
	}
}

// idem serve -db redis://… -provider URL without -ledger keeps the ledger,
// and the records of POST /transfers, in the embedded default idem.db of
// its working directory, and serves payouts with their records in Redis.
func TestPayoutE2ERedisDefaultLedger(t *testing.T) {
	t.Parallel()
	rdb := redisDB(t)
	dir := t.TempDir()
	prov, purl := fakeprovider.Start(t, nil)
	s := startServeIn(t, dir, "-db", rdb, "-provider", purl, "-complete-interval", "1h")
	if status, body := s.do(t, "PUT", "/accounts/alice", "", `{"balance":1000}`); status != 200 {
		t.Fatalf("PUT /accounts/alice: %d %s", status, body)
	}
	if status, body := s.do(t, "POST", "/payouts", "default-ledger", payoutBody()); status != 201 {
		t.Fatalf("POST /payouts: %d %s", status, body)
	}
	checkReconciled(t, s, prov, "default-ledger")
	if _, err := os.Stat(filepath.Join(dir, defaultDB)); err != nil {
		t.Fatalf("the default ledger %s: %v", defaultDB, err)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/batch"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/internal/mysqltest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
)

// importLedger is a ledger of idem serve's that idem import writes to: its
// -db argument and a connection to read it while import runs.
type importLedger struct {
	db  string
	row func(q string, dest ...any) error // one row of a query
}

const importAccounts = 10

// importStartBalance is every account's balance at the start: far more than
// a test file moves, so that only the rows meant to be refused are.
const importStartBalance = 1_000_000_000

// The databases an import runs on.
const (
	importSQLite   = "SQLite"
	importPostgres = "Postgres"
	importMySQL    = "MySQL"
)

// newImportLedger makes a ledger with accounts a0 to a9, on SQLite, on
// PostgreSQL (a fresh schema) or on MySQL (a fresh database), as idem
// serve would have it.
func newImportLedger(t *testing.T, kind string) *importLedger {
	t.Helper()
	ctx := context.Background()
	var (
		l      = &importLedger{}
		ledger *transfers.Database
	)
	switch kind {
	case importMySQL:
		_, dsn := mysqltest.Database(t)
		s, err := mysqlstore.Open(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		l.db, ledger = mysqltest.URL(t, dsn), transfers.MySQL(s)
		l.row = func(q string, dest ...any) error { return s.DB().QueryRowContext(ctx, q).Scan(dest...) }
	case importPostgres:
		schema, dsn := pgtest.Schema(t)
		s, err := pgstore.Open(ctx, dsn, &pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		l.db, ledger = dsn, transfers.Postgres(s)
		l.row = func(q string, dest ...any) error { return s.Pool().QueryRow(ctx, q).Scan(dest...) }
	default:
		l.db = filepath.Join(t.TempDir(), "ledger.db")
		s, err := sqlitestore.Open(ctx, l.db, nil)
		if err != nil {
			t.Fatal(err)
		}
		ledger = transfers.SQLite(s)
		defer s.Close() // the writer's lock is import's once set up
	}
	svc, err := transfers.New(ctx, ledger, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range importAccounts {
		w := httptest.NewRecorder()
		svc.ServeHTTP(w, httptest.NewRequest("PUT", fmt.Sprintf("/accounts/a%d", i), strings.NewReader(fmt.Sprintf(`{"balance":%d}`, importStartBalance))))
		if w.Code != 200 {
			t.Fatalf("PUT /accounts/a%d: %d %s", i, w.Code, w.Body.String())
		}
	}
	if kind == importSQLite {
		// A read-only connection, beside the writing process.
		ro, err := sqlitestore.Open(ctx, l.db, &sqlitestore.Config{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ro.Close() })
		l.row = func(q string, dest ...any) error { return ro.DB().QueryRowContext(ctx, q).Scan(dest...) }
	}
	return l
}

func (l *importLedger) int(t *testing.T, q string) int64 {
	t.Helper()
	var n int64
	if err := l.row(q, &n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (l *importLedger) imported(t *testing.T) int64 {
	t.Helper()
	return l.int(t, `SELECT count(*) FROM transfers WHERE batch_id IS NOT NULL`)
}

// importFile is a CSV of n transfers between the accounts, of which every
// 500th (from the 250th) is refused whatever the order the rows run in:
// to an account that does not exist, or more than all the money there
// is. want are the balances once every other row is applied once.
type importFile struct {
	path    string
	rows    int
	refused []string // row ids
	want    map[string]int64
}

func writeImportFile(t *testing.T, n int) *importFile {
	t.Helper()
	f := &importFile{path: filepath.Join(t.TempDir(), "transfers.csv"), rows: n, want: map[string]int64{}}
	for i := range importAccounts {
		f.want[fmt.Sprintf("a%d", i)] = importStartBalance
	}
	var b strings.Builder
	b.WriteString("id,from,to,amount\n")
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		from, to, amount := fmt.Sprintf("a%d", i%10), fmt.Sprintf("a%d", (3*i+1)%10), int64(i%97+1)
		switch {
		case i%500 == 250 && (i/500)%2 == 0:
			to = "ghost"
		case i%500 == 250:
			amount = 1_000_000_000_000_000
		default:
			f.want[from] -= amount
			f.want[to] += amount
		}
		if i%500 == 250 {
			f.refused = append(f.refused, id)
		}
		fmt.Fprintf(&b, "%s,%s,%s,%d\n", id, from, to, amount)
	}
	if err := os.WriteFile(f.path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// runImport runs idem import to its end and returns its summary, exit code
// and standard error.
func runImport(t *testing.T, args ...string) (importSummary, int, string) {
	t.Helper()
	stdout, code, stderr := runImportText(t, append([]string{"--json"}, args...)...)
	var sum importSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("idem import %v: exit %d, summary %v:\n%s\n%s", args, code, err, stdout, stderr)
	}
	return sum, code, stderr
}

// killImportAt starts idem import and kills it with SIGKILL once the ledger
// holds at least target imported transfers.
func killImportAt(t *testing.T, l *importLedger, target int64, args ...string) int64 {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(binary, append([]string{"import"}, args...)...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-exited:
			t.Fatalf("idem import ended (%v) before %d transfers were imported:\n%s", err, target, stderr.String())
		default:
		}
		if n := l.imported(t); n >= target {
			_ = cmd.Process.Kill() // SIGKILL
			<-exited
			return n
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("idem import had not imported %d transfers within 2 minutes:\n%s", target, stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// idem import of 5000 rows, killed with SIGKILL three times at random
// points and run again to its end: each row is applied once, the balances
// are those of every row applied once, the refused rows are refused (and
// recorded: the next run replays them), and a second full run applies
// nothing; on SQLite, PostgreSQL and MySQL.
func TestImportKilledThreeTimesAppliesEachRowOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{importSQLite, importPostgres, importMySQL} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			seed := e2eSeed(t)
			t.Logf("seed %d (IDEM_E2E_SEED replays it)", seed)
			rng := rand.New(rand.NewPCG(seed, seed))
			l := newImportLedger(t, kind)
			f := writeImportFile(t, 5000)
			good := int64(f.rows - len(f.refused))
			// Three kill points, rising, one in each of the file's first
			// three quarters: the last quarter leaves the process time
			// to be killed before it ends, on a loaded machine too.
			var reached []int64
			for k := range 3 {
				lo := good * int64(k) / 4
				target := lo + 100 + rng.Int64N(good/4-200)
				if len(reached) > 0 && target <= reached[len(reached)-1] {
					target = reached[len(reached)-1] + 1
				}
				reached = append(reached, killImportAt(t, l, target, "-db", l.db, f.path))
			}
			t.Logf("killed at %v imported transfers", reached)

			sum, code, stderr := runImport(t, "-db", l.db, f.path)
			if code != 1 || sum.Failed != 0 || sum.Refused != len(f.refused) || int64(sum.Applied+sum.Replayed) != good {
				t.Fatalf("run to the end: exit %d, %+v; want exit 1 (refusals), %d applied or replayed, %d refused\n%s",
					code, sum, good, len(f.refused), stderr)
			}
			if int64(sum.Replayed) < reached[2] {
				t.Errorf("the last run replayed %d rows; %d had been applied before it", sum.Replayed, reached[2])
			}
			var refused []string
			for _, r := range sum.Refusals {
				refused = append(refused, r.ID)
				if !strings.HasPrefix(r.Reason, "unknown-account:") && !strings.HasPrefix(r.Reason, "insufficient-funds:") {
					t.Errorf("row %s refused: %q", r.ID, r.Reason)
				}
			}
			if !reflect.DeepEqual(refused, f.refused) {
				t.Errorf("refused rows %v, want %v", refused, f.refused)
			}
			if !strings.Contains(stderr, "import: 5000/5000 rows (100%)") {
				t.Errorf("no progress line on stderr:\n%s", stderr)
			}
			l.checkApplied(t, f)

			sum, code, _ = runImport(t, "-db", l.db, f.path)
			if code != 1 || sum.Applied != 0 || int64(sum.Replayed) != good || sum.Refused != len(f.refused) || sum.Failed != 0 {
				t.Errorf("second full run: exit %d, %+v; want nothing applied, %d replayed, %d refused", code, sum, good, len(f.refused))
			}
			for _, r := range sum.Refusals {
				if !r.Replayed {
					t.Errorf("row %s: refused again rather than replayed", r.ID)
				}
			}
			l.checkApplied(t, f)
		})
	}
}

// checkApplied checks that every good row of f is in the ledger once and
// the balances are as intended.
func (l *importLedger) checkApplied(t *testing.T, f *importFile) {
	t.Helper()
	good := int64(f.rows - len(f.refused))
	if n := l.imported(t); n != good {
		t.Errorf("%d imported transfers, want %d", n, good)
	}
	if n := l.int(t, `SELECT count(*) FROM (SELECT batch_id, row_id FROM transfers GROUP BY batch_id, row_id HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d rows applied more than once", n)
	}
	if n := l.int(t, `SELECT count(DISTINCT row_id) FROM transfers`); n != good {
		t.Errorf("%d distinct rows in the ledger, want %d", n, good)
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range f.want {
			if !yield(id) {
				return
			}
		}
	}) {
		if got := l.int(t, `SELECT balance FROM accounts WHERE id = '`+id+`'`); got != f.want[id] {
			t.Errorf("balance of %s = %d, want %d", id, got, f.want[id])
		}
	}
}

func writeCSV(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.csv")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A file with malformed lines is applied nowhere, its good rows included:
// every malformed line is reported by its number, in text and in JSON,
// and the exit status is 1.
func TestImportMalformedFileAppliesNothing(t *testing.T) {
	t.Parallel()
	l := newImportLedger(t, importSQLite)
	file := writeCSV(t,
		"id,from,to,amount",
		"r1,a0,a1,5",
		"r2,a0,a1",
		"r1,a0,a2,5",
		"r4,a0,a0,5",
		"r5,a0,a1,-5",
		",a0,a1,5",
		"r7,a0,a1,12.50",
		"r8,a0,a1,5",
	)
	want := map[int]string{3: "3 fields", 4: "already used on line 2", 5: "same account", 6: "not positive", 7: "id: empty", 8: "not an integer"}
	sum, code, _ := runImport(t, "-db", l.db, file)
	if code != 1 || sum.Applied+sum.Replayed+sum.Refused+sum.Failed != 0 {
		t.Errorf("exit %d, %+v; want exit 1 and nothing run", code, sum)
	}
	got := map[int]string{}
	for _, m := range sum.Malformed {
		got[m.Line] = m.Reason
	}
	if len(got) != len(want) {
		t.Errorf("malformed lines %v, want lines %v", sum.Malformed, want)
	}
	for line, w := range want {
		if !strings.Contains(got[line], w) {
			t.Errorf("line %d: %q, want it to say %q", line, got[line], w)
		}
	}
	// The text form names the lines too.
	out, err := exec.Command(binary, "import", "-db", l.db, file).CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 {
		t.Errorf("text form: %v, want exit 1", err)
	}
	for line := range want {
		if !strings.Contains(string(out), fmt.Sprintf("line %d: ", line)) {
			t.Errorf("text form lacks line %d:\n%s", line, out)
		}
	}
	if !strings.Contains(string(out), "nothing applied") {
		t.Errorf("text form does not say nothing was applied:\n%s", out)
	}
	if n := l.int(t, `SELECT count(*) FROM transfers`); n != 0 {
		t.Errorf("%d transfers after a malformed file, want 0", n)
	}
}

// The --json summary has a fixed shape: every member always present, the
// lists empty rather than absent.
func TestImportJSONShape(t *testing.T) {
	t.Parallel()
	l := newImportLedger(t, importSQLite)
	file := writeCSV(t, "id,from,to,amount", "r1,a0,a1,5", "r2,a0,ghost,5")
	out, err := exec.Command(binary, "import", "-db", l.db, "--json", file).Output()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v, want 1 (a row refused)", err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	members := slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			if !yield(k) {
				return
			}
		}
	})
	want := []string{"applied", "batch_id", "failed", "failures", "file", "malformed", "refusals", "refused", "replayed", "rows", "seconds"}
	if !reflect.DeepEqual(members, want) {
		t.Errorf("members %v, want %v", members, want)
	}
	if got["applied"] != 1.0 || got["refused"] != 1.0 || got["rows"] != 2.0 || got["file"] != file {
		t.Errorf("summary %s", out)
	}
	if !strings.HasPrefix(got["batch_id"].(string), "sha256:") || len(got["batch_id"].(string)) != len("sha256:")+64 {
		t.Errorf("default batch id %v, want sha256: and 64 hex digits", got["batch_id"])
	}
	refusals, _ := got["refusals"].([]any)
	if len(refusals) != 1 {
		t.Fatalf("refusals %v, want one", got["refusals"])
	}
	r := refusals[0].(map[string]any)
	if r["line"] != 3.0 || r["id"] != "r2" || !strings.HasPrefix(r["reason"].(string), "unknown-account:") {
		t.Errorf("refusal %v, want line 3, row r2, unknown-account", r)
	}
	if f, ok := got["failures"].([]any); !ok || len(f) != 0 {
		t.Errorf("failures %v, want []", got["failures"])
	}

	// Flags may follow the file too: the re-run replays, as JSON.
	out, err = exec.Command(binary, "import", file, "-db", l.db, "--json").Output()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 {
		t.Fatalf("flags after the file: exit %v, want 1\n%s", err, out)
	}
	var again map[string]any
	if err := json.Unmarshal(out, &again); err != nil || again["replayed"] != 1.0 || again["applied"] != 0.0 {
		t.Fatalf("flags after the file: %v\n%s; want the JSON summary of a replay", err, out)
	}
}

// -batch names the batch: the transfers show it in GET /transfers of idem
// serve on the same file, a re-run of the same file as the same batch
// replays, and a row changed under the same batch and id is refused as a
// mismatch, not applied. While idem serve holds the SQLite file, import
// says so and applies nothing.
func TestImportExplicitBatchShowsInTransfers(t *testing.T) {
	t.Parallel()
	l := newImportLedger(t, importSQLite)
	file := writeCSV(t, "id,from,to,amount", "r1,a0,a1,5", "r2,a1,a2,7")
	sum, code, stderr := runImport(t, "-db", l.db, "-batch", "payroll-2026-05", file)
	if code != 0 || sum.BatchID != "payroll-2026-05" || sum.Applied != 2 {
		t.Fatalf("exit %d, %+v\n%s", code, sum, stderr)
	}
	changed := writeCSV(t, "id,from,to,amount", "r1,a0,a1,5", "r2,a1,a2,8", "r3,a2,a3,9")
	sum, code, _ = runImport(t, "-db", l.db, "-batch", "payroll-2026-05", changed)
	if code != 1 || sum.Replayed != 1 || sum.Refused != 1 || sum.Applied != 1 {
		t.Errorf("changed file as the same batch: exit %d, %+v; want r1 replayed, r2 refused, r3 applied", code, sum)
	} else if r := sum.Refusals[0]; r.ID != "r2" || r.Line != 3 || !strings.Contains(r.Reason, "mismatch") {
		t.Errorf("refusal %+v, want r2 on line 3, a mismatch", r)
	}

	// The row's record, as idem inspect shows it.
	var out bytes.Buffer
	if err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(),
		[]string{"inspect", "-db", l.db, transfers.ImportScope, batch.Key("payroll-2026-05", "r2")}); err != nil {
		t.Errorf("inspect of an imported row: %v", err)
	} else if !strings.Contains(out.String(), "completed") || !strings.Contains(out.String(), "201") {
		t.Errorf("inspect of an imported row:\n%s", out.String())
	}

	s := startServe(t, "-db", l.db)
	status, body := s.do(t, "GET", "/transfers", "", "")
	var list struct{ Transfers []transfers.Transfer }
	if status != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Transfers) != 3 {
		t.Fatalf("GET /transfers: %d %s", status, body)
	}
	for i, want := range []struct {
		row    string
		amount int64
	}{{"r1", 5}, {"r2", 7}, {"r3", 9}} {
		if tr := list.Transfers[i]; tr.BatchID != "payroll-2026-05" || tr.RowID != want.row || tr.Amount != want.amount {
			t.Errorf("transfer %d: %+v, want batch payroll-2026-05, row %s, amount %d", i, tr, want.row, want.amount)
		}
	}
	// serve holds the file: import refuses to start, and says why.
	_, code, stderr = runImportText(t, "-db", l.db, file)
	if code != 1 || !strings.Contains(stderr, "in use by another process") || !strings.Contains(stderr, "stop idem serve") {
		t.Errorf("import beside serve: exit %d\n%s\nwant exit 1 saying the file is in use", code, stderr)
	}
	if n := s.transferCount(t); n != 3 {
		t.Errorf("%d transfers after the refused import, want 3", n)
	}
	s.stop(t)
}

// runImportText runs idem import without --json.
func runImportText(t *testing.T, args ...string) (string, int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, append([]string{"import"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), code, stderr.String()
}

func TestImportUsageErrors(t *testing.T) {
	t.Parallel()
	file := writeCSV(t, "id,from,to,amount", "r1,a0,a1,5")
	for _, args := range [][]string{
		{},
		{file, file},
		{"-concurrency", "-1", file},
		{"-ttl", "0s", file},
		{"-batch", " padded", file},
		{"-batch", strings.Repeat("b", 256), file},
		{"-nope", file},
	} {
		err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(), append([]string{"import"}, args...))
		if !errors.As(err, new(usageError)) {
			t.Errorf("idem import %v: %v, want a usage error", args, err)
		}
	}
	var out bytes.Buffer
	if err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{"import", "-h"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Usage: idem import") {
		t.Errorf("idem import -h: %v\n%s", err, out.String())
	}
	// A SQLite path with no file is refused, not created.
	missing := filepath.Join(t.TempDir(), "typo.db")
	err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(), []string{"import", "-db", missing, file})
	if err == nil || !strings.Contains(err.Error(), "no database there") {
		t.Errorf("import into a missing file: %v, want no database there", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("import created %s", missing)
	}
}

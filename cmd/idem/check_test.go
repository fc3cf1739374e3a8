package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem/internal/check"
	"github.com/idemkit/idem/internal/checktest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/servertest"
)

// checkOutput is the part of idem check --json the tests read.
type checkOutput struct {
	Endpoints []struct {
		Name, URL, Effects, Error string
		Counted                   bool
		Rules                     []struct {
			Rule       int
			Name       string
			Status     check.Status
			Reason     string
			Duplicated *bool
		}
		EffectsCaused int64 `json:"effects_caused"`
	}
	Fail, Warn    int
	EffectsCaused int64 `json:"effects_caused"`
	Failed        bool
}

func (o checkOutput) statuses(i int) map[int]check.Status {
	m := map[int]check.Status{}
	for _, r := range o.Endpoints[i].Rules {
		m[r.Rule] = r.Status
	}
	return m
}

// runCheck runs the idem binary's check with args and returns its JSON
// report, its exit status and its output.
func runCheck(t *testing.T, args ...string) (checkOutput, int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(binary, append([]string{"check", "--json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var o checkOutput
	if err := json.Unmarshal(out.Bytes(), &o); err != nil || len(o.Endpoints) == 0 {
		t.Fatalf("idem check %v: exit %d, no JSON report (%v):\n%s\n%s", args, code, err, out.String(), errOut.String())
	}
	return o, code, out.String() + errOut.String()
}

// transferArgs audits POST /transfers of the idem serve at addr, with
// two principals, some flags after the URL as curl allows, and the
// ledger's count of transfers as the effects counter (counted).
func transferArgs(addr string, counted bool) []string {
	args := []string{
		"-H", "Authorization: Bearer alice",
		"-d", `{"from":"a","to":"b","amount":1}`,
		"http://" + addr + "/transfers",
		"--principal2", "Authorization: Bearer bob",
	}
	if counted {
		args = append(args, "--effects-url", "http://"+addr+"/transfers", "--effects-path", "count")
	}
	return args
}

// idem serve passes every rule, on SQLite and on PostgreSQL, with the
// effects counted and inferred, and the figures agree with its ledger.
func TestCheckServe(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "check.db") }},
		{"Postgres", func(t *testing.T) string { _, dsn := pgtest.Schema(t); return dsn }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServe(t, "-db", tt.db(t))
			s.accounts(t)
			want := checktest.Expected(checktest.Correct)
			for _, counted := range []bool{true, false} {
				before := s.transferCount(t)
				o, code, out := runCheck(t, transferArgs(s.addr, counted)...)
				if got := o.statuses(0); code != 0 || !maps.Equal(got, want) || o.Endpoints[0].Counted != counted {
					t.Errorf("counted=%v: exit %d, verdicts %v, want 0 and %v\n%s", counted, code, got, want, out)
				}
				if made := int64(s.transferCount(t) - before); o.EffectsCaused != made {
					t.Errorf("counted=%v: report says %d effects caused, the ledger %d", counted, o.EffectsCaused, made)
				}
			}
			s.stop(t)
		})
	}
}

// idem serve -idempotency off: retries and concurrent duplicates run
// again (rules 1 and 2 fail), and so does everything a key should have
// stopped; rule 8 reports the duplication. Rule 7 sees each principal's
// request run, but principal 1's own retry runs again before principal 2
// comes (rule 1's finding), so what principal 2 changed cannot be told:
// WARN. The exit status is 1.
func TestCheckServeIdempotencyOff(t *testing.T) {
	t.Parallel()
	s := startServe(t, "-db", filepath.Join(t.TempDir(), "off.db"), "-idempotency", "off")
	s.accounts(t)
	want := map[int]check.Status{1: check.Fail, 2: check.Fail, 3: check.Fail, 4: check.Fail, 5: check.Fail, 6: check.Fail, 7: check.Warn, 8: check.Warn}
	for _, counted := range []bool{true, false} {
		o, code, out := runCheck(t, transferArgs(s.addr, counted)...)
		if got := o.statuses(0); code != 1 || !maps.Equal(got, want) || !o.Failed {
			t.Errorf("counted=%v: exit %d, verdicts %v; want 1 and %v\n%s", counted, code, got, want, out)
		}
		r2 := o.Endpoints[0].Rules[1]
		if counted && !strings.Contains(r2.Reason, "20 effects for 20 concurrent requests") {
			t.Errorf("rule 2's reason %q does not count the duplicates", r2.Reason)
		}
		if dup := o.Endpoints[0].Rules[7].Duplicated; dup == nil || !*dup {
			t.Errorf("counted=%v: rule 8 duplicated = %v, want true", counted, dup)
		}
	}
	// Without --json: the table, the evidence and the summary line.
	var out bytes.Buffer
	cmd := exec.Command(binary, append([]string{"check"}, transferArgs(s.addr, true)...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want 1", err)
	}
	for _, w := range []string{"RULE", "STATUS", "REASON", "1 retry", "FAIL", "8 no-key-twice", "WARN",
		"Concurrent duplicates with one key (FAIL", "effects: ",
		"summary: 8 rules: 0 PASS, 6 FAIL, 2 WARN, 0 SKIP; effects caused: ", "idem: check: 6 rule(s) failed"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	s.stop(t)
}

// fixtureArgs audits a checktest fixture served over loopback HTTP.
func fixtureArgs(url string) []string {
	return []string{
		"-H", "Authorization: Bearer alice", "--principal2", "Authorization: Bearer bob",
		"-d", `{"to":"bob","amount":10}`,
		"--effects-url", url + "/payments/count", "--effects-path", "count",
		url + "/payments",
	}
}

// Each broken fixture is caught by its rule, through the command, and
// nothing else complains; the exit status is 1 only for a FAIL. The
// audits run at once, in process (Main.Run), against servers on loopback.
func TestCheckFixtures(t *testing.T) {
	t.Parallel()
	type audit struct {
		defect checktest.Defect
		out    bytes.Buffer
		err    error
	}
	var audits []*audit
	var wg sync.WaitGroup
	for _, d := range checktest.Defects {
		ts := httptest.NewServer(checktest.New(checktest.Config{Defect: d}))
		t.Cleanup(ts.Close)
		a := &audit{defect: d}
		audits = append(audits, a)
		wg.Go(func() {
			m := &Main{Stdout: &a.out, Stderr: io.Discard}
			a.err = m.Run(context.Background(), append([]string{"check", "--json"}, fixtureArgs(ts.URL)...))
		})
	}
	wg.Wait()
	for _, a := range audits {
		t.Run(string(a.defect), func(t *testing.T) {
			var o checkOutput
			if err := json.Unmarshal(a.out.Bytes(), &o); err != nil {
				t.Fatalf("%v: %v\n%s", a.err, err, a.out.String())
			}
			want := checktest.Expected(a.defect)
			if got := o.statuses(0); !maps.Equal(got, want) {
				t.Errorf("verdicts %v, want %v\n%s", got, want, a.out.String())
			}
			fails := slicesContains(want, check.Fail)
			if (a.err != nil) != fails || o.Failed != fails {
				t.Errorf("err = %v, failed = %v; want a failure: %v", a.err, o.Failed, fails)
			}
		})
	}
}

func slicesContains(m map[int]check.Status, s check.Status) bool {
	for _, v := range m {
		if v == s {
			return true
		}
	}
	return false
}

// A plan audits several endpoints in one report; its fields override the
// flags, which are the defaults; a body may be JSON, text or @FILE.
func TestCheckPlan(t *testing.T) {
	t.Parallel()
	good := httptest.NewServer(checktest.New(checktest.Config{}))
	t.Cleanup(good.Close)
	shared := httptest.NewServer(checktest.New(checktest.Config{Defect: checktest.GlobalNamespace}))
	t.Cleanup(shared.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "body.json"), []byte(`{"to":"carol","amount":3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := fmt.Sprintf(`{"endpoints": [
		{"name": "payments", "url": %q, "body": {"to": "bob", "amount": 10},
		 "effects_url": %q, "effects_path": "count"},
		{"name": "text body", "url": %q, "body": "{\"to\":\"bob\",\"amount\":1}", "concurrency": 5},
		{"name": "from a file", "url": %q, "body": "@body.json", "headers": ["Authorization: Bearer carol"]}
	]}`, good.URL+"/payments", good.URL+"/payments/count", good.URL+"/payments", shared.URL+"/payments")
	path := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{
		"check", "--plan", path, "--json", "-H", "Authorization: Bearer alice", "--principal2", "Authorization: Bearer bob",
	})
	var o checkOutput
	if jerr := json.Unmarshal(out.Bytes(), &o); jerr != nil || len(o.Endpoints) != 3 {
		t.Fatalf("%v %v\n%s", err, jerr, out.String())
	}
	ok := checktest.Expected(checktest.Correct)
	for i, want := range []map[int]check.Status{ok, ok, checktest.Expected(checktest.GlobalNamespace)} {
		if got := o.statuses(i); !maps.Equal(got, want) || o.Endpoints[i].Error != "" {
			t.Errorf("endpoint %d (%s): verdicts %v, want %v (error %q)", i, o.Endpoints[i].Name, got, want, o.Endpoints[i].Error)
		}
	}
	if !o.Endpoints[0].Counted || o.Endpoints[1].Counted {
		t.Errorf("counted: %v, %v; want only the first", o.Endpoints[0].Counted, o.Endpoints[1].Counted)
	}
	if err == nil || !o.Failed || o.Fail != 1 {
		t.Errorf("err = %v, failed %v, %d FAIL; want the third endpoint's failure", err, o.Failed, o.Fail)
	}
	// The text report ends with a line over every endpoint.
	out.Reset()
	_ = (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{
		"check", "--plan", path, "-H", "Authorization: Bearer alice", "--principal2", "Authorization: Bearer bob",
	})
	if !strings.Contains(out.String(), "total: 3 endpoints: 23 PASS, 1 FAIL, 0 WARN, 0 SKIP") {
		t.Errorf("text report lacks the total:\n%s", out.String())
	}
}

// An endpoint that refuses the request: nothing is judged, the exit
// status is 1 and the report says why.
func TestCheckRefused(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(checktest.New(checktest.Config{}))
	t.Cleanup(ts.Close)
	var out bytes.Buffer
	err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{"check", "-d", `{"to":"bob","amount":10}`, ts.URL + "/payments"})
	if err == nil || !strings.Contains(out.String(), "did not accept the request") || !strings.Contains(out.String(), "401") {
		t.Errorf("err = %v, output:\n%s\nwant a failure naming the 401", err, out.String())
	}
	var ue usageError
	if errors.As(err, &ue) {
		t.Errorf("a refused request is a usage error (exit 2): %v", err)
	}
}

// --effects-cmd counts with a shell command.
func TestCheckEffectsCmd(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		servertest.Missing(t, "curl, the effects command of this test, is not installed", err)
	}
	s := checktest.New(checktest.Config{})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	var out bytes.Buffer
	err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{
		"check", "--json", "-H", "Authorization: Bearer alice", "-d", `{"to":"bob","amount":10}`, ts.URL + "/payments",
		"--effects-cmd", fmt.Sprintf(`curl -sf %s/payments/count | tr -dc 0-9`, ts.URL),
	})
	var o checkOutput
	if jerr := json.Unmarshal(out.Bytes(), &o); jerr != nil || err != nil || !o.Endpoints[0].Counted || !strings.Contains(o.Endpoints[0].Effects, "sh -c") {
		t.Fatalf("err %v, %v:\n%s", err, jerr, out.String())
	}
	if o.EffectsCaused != int64(s.Effects()) {
		t.Errorf("effects caused %d, the server made %d", o.EffectsCaused, s.Effects())
	}
}

func TestCheckUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yaml := filepath.Join(dir, "plan.yaml")
	typo := filepath.Join(dir, "typo.json")
	_ = os.WriteFile(yaml, []byte("endpoints: []\n"), 0o644)
	_ = os.WriteFile(typo, []byte(`{"endpoints":[{"url":"http://x/","bdy":"{}"}]}`), 0o644)
	u := "http://127.0.0.1:1/x"
	for _, args := range [][]string{
		{},
		{u, u},
		{"ftp://x/y"},
		{"/relative"},
		{"-H", "no colon", u},
		{u, "--principal2", "nope"},
		{u, "--concurrency", "1"},
		{u, "--effects-path", "count"},
		{u, "--effects-url", u, "--effects-cmd", "echo 1"},
		{u, "--effects-url", "nope"},
		{u, "-d", "@" + filepath.Join(dir, "missing")},
		{u, "-H", "Idempotency-Key: k"},
		{u, "-X", "PO ST"},
		{u, "--timeout", "0s"},
		{"--plan", yaml},
		{"--plan", typo},
		{"--plan", typo, u},
		{"--plan", filepath.Join(dir, "missing.json")},
		{"--nope", u},
	} {
		var errOut bytes.Buffer
		err := (&Main{Stdout: io.Discard, Stderr: &errOut}).Run(context.Background(), append([]string{"check"}, args...))
		if !errors.As(err, new(usageError)) {
			t.Errorf("idem check %v: err = %v, want a usage error", args, err)
		}
	}
	var out bytes.Buffer
	err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{"check", "-h"})
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Usage: idem check") || !strings.Contains(out.String(), "8 no-key-twice") {
		t.Errorf("idem check -h: %v\n%s", err, out.String())
	}
	var help bytes.Buffer
	_ = (&Main{Stdout: &help, Stderr: io.Discard}).Run(context.Background(), []string{"help"})
	if !strings.Contains(help.String(), "check ") {
		t.Errorf("idem help does not list check:\n%s", help.String())
	}
}

// A YAML plan is the JSON plan written in YAML: same fields, same report.
func TestCheckPlanYAML(t *testing.T) {
	t.Parallel()
	good := httptest.NewServer(checktest.New(checktest.Config{}))
	t.Cleanup(good.Close)
	plan := fmt.Sprintf(`endpoints:
  - name: payments
    url: %s
    body:
      to: bob
      amount: 10
    headers: ["Authorization: Bearer alice"]
    principal2: ["Authorization: Bearer bob"]
    effects_url: %s
    effects_path: count
`, good.URL+"/payments", good.URL+"/payments/count")
	path := filepath.Join(t.TempDir(), "plan.yml")
	if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := (&Main{Stdout: &out, Stderr: io.Discard}).Run(context.Background(), []string{"check", "--plan", path, "--json"})
	var o checkOutput
	if jerr := json.Unmarshal(out.Bytes(), &o); jerr != nil || err != nil || len(o.Endpoints) != 1 {
		t.Fatalf("err %v, %v\n%s", err, jerr, out.String())
	}
	if got, want := o.statuses(0), checktest.Expected(checktest.Correct); !maps.Equal(got, want) || !o.Endpoints[0].Counted {
		t.Errorf("verdicts %v (counted %v), want %v counted", got, o.Endpoints[0].Counted, want)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("endpoints: [unclosed\n"), 0o644)
	if err := (&Main{Stdout: io.Discard, Stderr: io.Discard}).Run(context.Background(), []string{"check", "--plan", bad}); !errors.As(err, new(usageError)) {
		t.Errorf("a malformed YAML plan: err %v, want a usage error", err)
	}
}

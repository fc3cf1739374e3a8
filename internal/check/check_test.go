package check_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem/internal/check"
	"github.com/idemkit/idem/internal/checktest"
)

// setup returns a fixture server and an endpoint that audits it, through
// the handler in process or over loopback HTTP, with or without its
// effects counter.
func setup(t *testing.T, cfg checktest.Config, network, counted bool) (*checktest.Server, check.Doer, check.Endpoint) {
	t.Helper()
	s := checktest.New(cfg)
	d, url := check.HandlerDoer(s), "/payments"
	if network {
		ts := httptest.NewServer(s)
		t.Cleanup(ts.Close)
		d, url = check.ClientDoer(nil), ts.URL+"/payments"
	}
	e := check.Endpoint{
		URL:        url,
		Header:     http.Header{"Authorization": {"Bearer alice"}},
		Body:       []byte(`{"to":"bob","amount":10}`),
		Principal2: http.Header{"Authorization": {"Bearer bob"}},
	}
	if counted {
		e.Effects = check.URLCounter(d, strings.TrimSuffix(url, "/payments")+"/payments/count", nil, "count")
		e.EffectsSource = "GET /payments/count → count"
	}
	return s, d, e
}

func run(t *testing.T, d check.Doer, e check.Endpoint) *check.Report {
	t.Helper()
	rep, err := check.Run(context.Background(), d, e)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// assertStatuses compares every rule's verdict with want and shows the
// report when they differ.
func assertStatuses(t *testing.T, rep *check.Report, want map[int]check.Status) {
	t.Helper()
	if got := rep.Statuses(); !maps.Equal(got, want) || rep.Error != "" {
		var b bytes.Buffer
		_ = check.WriteText(&b, []*check.Report{rep})
		t.Errorf("verdicts %v, want %v (error %q)\n%s", got, want, rep.Error, b.String())
	}
}

// maxAudits is how many fixture audits TestFixtures runs at once.
const maxAudits = 12

// Each defect is caught by the rule meant for it, and every other rule
// passes or, where the defect breaks its baseline, says so (the whole map
// of checktest.Expected), in process and over HTTP, with a counter and
// without. The audits run together (they mostly wait on the fixtures' holds), not
// under t.Parallel, which would run two at a time on two cores, but at
// most maxAudits at once: more bursts of rule 2 at once on a loaded
// machine would spread a burst over more than a fixture's hold.
func TestFixtures(t *testing.T) {
	t.Parallel()
	type audit struct {
		name    string
		defect  checktest.Defect
		counted bool
		server  *checktest.Server
		rep     *check.Report
		err     error
	}
	var audits []*audit
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxAudits)
	for _, d := range checktest.Defects {
		for _, network := range []bool{false, true} {
			for _, counted := range []bool{true, false} {
				s, doer, e := setup(t, checktest.Config{Defect: d}, network, counted)
				a := &audit{name: fmt.Sprintf("%s/network=%v/counted=%v", d, network, counted), defect: d, counted: counted, server: s}
				audits = append(audits, a)
				wg.Go(func() {
					slots <- struct{}{}
					defer func() { <-slots }()
					a.rep, a.err = check.Run(context.Background(), doer, e)
				})
			}
		}
	}
	wg.Wait()
	for _, a := range audits {
		t.Run(a.name, func(t *testing.T) {
			if a.err != nil {
				t.Fatal(a.err)
			}
			assertStatuses(t, a.rep, checktest.Expected(a.defect))
			if a.rep.Counted != a.counted {
				t.Errorf("Counted = %v, want %v", a.rep.Counted, a.counted)
			}
			// Counted, the report's figure is the server's; inferred, it
			// is exact here, since bodies carry the payment id.
			if got, want := a.rep.EffectsCaused, int64(a.server.Effects()); got != want {
				t.Errorf("EffectsCaused = %d, the server made %d", got, want)
			}
		})
	}
}

// A FAIL's reason names what went wrong, with evidence.
func TestFailureReasons(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		defect checktest.Defect
		rule   int
		want   []string
	}{
		{checktest.SeparateTx, 2, []string{"20 effects for 20 concurrent requests", "20 × 201"}},
		{checktest.CheckThenInsert, 2, []string{"20 effects"}},
		{checktest.GlobalNamespace, 7, []string{"second principal got a replay", "keys are shared between principals"}},
		{checktest.Conflict409, 1, []string{"answered 409", "not the original response"}},
		{checktest.RawFingerprint, 4, []string{"refused (422)", "identical retry got 201"}},
	} {
		t.Run(string(tt.defect), func(t *testing.T) {
			t.Parallel()
			_, d, e := setup(t, checktest.Config{Defect: tt.defect}, false, true)
			rep := run(t, d, e)
			res := rep.Results[tt.rule-1]
			for _, w := range tt.want {
				if !strings.Contains(res.Reason, w) {
					t.Errorf("rule %d's reason %q lacks %q", tt.rule, res.Reason, w)
				}
			}
			if res.EffectsBefore == nil || res.EffectsAfter == nil || len(res.Exchanges) == 0 || len(res.Evidence) == 0 {
				t.Errorf("rule %d without evidence: %+v", tt.rule, res)
			}
		})
	}
}

// A verdict other than PASS says exactly what differs, with evidence,
// counted and inferred: a lost header names it and both values (and no
// identical hashes as a difference), a broken baseline says which.
func TestVerdictReasons(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		defect  checktest.Defect
		rule    int
		counted bool
		want    []string
	}{
		{checktest.ReplayDropsLocation, 1, true, []string{"duplicate safe: one effect (counted)", `header Location "/payments/`, `", then absent`}},
		{checktest.ReplayDropsLocation, 1, false, []string{"duplicate safe: one effect (inferred)", `header Location "/payments/`, `", then absent`}},
		{checktest.ReplayDropsLocation, 2, true, []string{"duplicate safe: one effect (counted)", `", then absent (19 of 19 replays)`}},
		{checktest.UpsertAcrossPrincipals, 7, true, []string{"first principal's retry ran again", "+3 over the rule, want +2", "body sha256"}},
		{checktest.UpsertAcrossPrincipals, 7, false, []string{"first principal's retry ran again", "inferred", "body sha256"}},
		{checktest.RefuseRetries, 3, true, []string{"refused (422), but so was the identical retry (422, the same bytes)"}},
		{checktest.RefuseRetries, 4, true, []string{"the identical retry was refused (422)"}},
		{checktest.RefuseRetries, 7, true, []string{"even before the second principal (422"}},
		{checktest.KeylessPerPrincipal, 8, true, []string{"with no effect (counted)", "another request's result"}},
		{checktest.KeylessPerPrincipal, 8, false, []string{`another request's recorded result, that of rule 5's request "no key"`}},
		{checktest.AnyKey, 6, true, []string{"256 characters: accepted (201), its retry replayed, one effect (counted)", "non-ASCII: accepted"}},
	} {
		t.Run(fmt.Sprintf("%s/rule%d/counted=%v", tt.defect, tt.rule, tt.counted), func(t *testing.T) {
			t.Parallel()
			_, d, e := setup(t, checktest.Config{Defect: tt.defect}, false, tt.counted)
			rep := run(t, d, e)
			res := rep.Results[tt.rule-1]
			for _, w := range tt.want {
				if !strings.Contains(res.Reason, w) {
					t.Errorf("rule %d's reason %q lacks %q", tt.rule, res.Reason, w)
				}
			}
			for _, x := range res.Exchanges {
				if strings.Contains(res.Reason, fmt.Sprintf("%s, then %s", x.Digest, x.Digest)) {
					t.Errorf("rule %d's reason %q names one hash as a difference", tt.rule, res.Reason)
				}
			}
		})
	}
}

// takeover is the Correct fixture behind a layer that hands a key to the
// last principal that used it: the first principal's retry after the
// second's is refused with 409.
type takeover struct {
	next  http.Handler
	mu    sync.Mutex
	users map[string][]string // key → principals, in order of first use
}

func (h *takeover) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k, p := r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization")
	if k != "" && r.Method == http.MethodPost {
		h.mu.Lock()
		us := h.users[k]
		refused := slices.Contains(us, p) && us[len(us)-1] != p
		if !slices.Contains(us, p) {
			h.users[k] = append(us, p)
		}
		h.mu.Unlock()
		if refused {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "key in use by another principal", http.StatusConflict)
			return
		}
	}
	h.next.ServeHTTP(w, r)
}

// A refusal of the first principal's retry after the second principal
// used the key is a FAIL: its retry before got the replay.
func TestOtherPrincipalRefusalFails(t *testing.T) {
	t.Parallel()
	for _, counted := range []bool{true, false} {
		h := &takeover{next: checktest.New(checktest.Config{}), users: map[string][]string{}}
		d := check.HandlerDoer(h)
		e := check.Endpoint{
			URL:        "/payments",
			Header:     http.Header{"Authorization": {"Bearer alice"}},
			Body:       []byte(`{"to":"bob","amount":10}`),
			Principal2: http.Header{"Authorization": {"Bearer bob"}},
		}
		if counted {
			e.Effects = check.URLCounter(d, "/payments/count", nil, "count")
		}
		rep := run(t, d, e)
		want := checktest.Expected(checktest.Correct)
		want[7] = check.Fail
		assertStatuses(t, rep, want)
		if r := rep.Results[6].Reason; !strings.Contains(r, "status 201, then 409") {
			t.Errorf("counted=%v: rule 7's reason %q does not name the refusal", counted, r)
		}
	}
}

// Answers that do not tell executions apart: without a counter, the
// engine says so and the rule that needs more than the replay marker
// (a second principal's identical, unmarked answer) is a WARN; with a
// counter, everything passes.
func TestConstantBodies(t *testing.T) {
	t.Parallel()
	_, d, e := setup(t, checktest.Config{ConstantBody: true}, false, false)
	rep := run(t, d, e)
	want := checktest.Expected(checktest.Correct)
	want[7] = check.Warn
	assertStatuses(t, rep, want)
	if !strings.Contains(rep.Effects, "weakly") {
		t.Errorf("Effects = %q, want it to say the inference is weak", rep.Effects)
	}
	_, d, e = setup(t, checktest.Config{ConstantBody: true}, false, true)
	assertStatuses(t, run(t, d, e), checktest.Expected(checktest.Correct))

	// And a server that runs every request again, answering the same
	// bytes without the marker, is a WARN, not a PASS, for rules 1 and 2.
	again := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	rep = run(t, check.HandlerDoer(again), check.Endpoint{URL: "/x", Body: []byte(`{"a":1}`), Concurrency: 2})
	if rep.Status(1) != check.Warn || rep.Status(2) != check.Warn {
		t.Errorf("a server that always runs, answering the same bytes: rule 1 %s, rule 2 %s; want WARN for both", rep.Status(1), rep.Status(2))
	}
}

// An endpoint whose key is optional: rule 5 expects a 2xx when that is
// declared and fails when it is not; rule 8 reports the duplication.
func TestKeyOptional(t *testing.T) {
	t.Parallel()
	for _, declared := range []bool{true, false} {
		_, d, e := setup(t, checktest.Config{KeyOptional: true}, false, true)
		e.KeyOptional = declared
		rep := run(t, d, e)
		want := checktest.Expected(checktest.Correct)
		want[8] = check.Warn
		want[5] = check.Pass
		if !declared {
			want[5] = check.Fail
		}
		assertStatuses(t, rep, want)
		if dup := rep.Results[7].Duplicated; dup == nil || !*dup {
			t.Errorf("rule 8: Duplicated = %v, want true", dup)
		}
	}
}

// An endpoint that refuses the request stops the audit: nothing is
// judged, and the report says why and fails.
func TestProbeRefused(t *testing.T) {
	t.Parallel()
	_, d, e := setup(t, checktest.Config{}, false, true)
	e.Header = nil // no credentials: 401
	rep := run(t, d, e)
	if !rep.Failed() || !strings.Contains(rep.Error, "401") || rep.Skip != 8 {
		t.Errorf("Error %q, %d skipped, Failed %v; want a stop naming the 401 and 8 SKIP", rep.Error, rep.Skip, rep.Failed())
	}
}

// A counter that does not count the endpoint's effects stops the audit
// rather than giving verdicts on wrong figures.
func TestCounterMustCount(t *testing.T) {
	t.Parallel()
	_, d, e := setup(t, checktest.Config{}, false, false)
	e.Effects = func(context.Context) (int64, error) { return 7, nil }
	rep := run(t, d, e)
	if !rep.Failed() || !strings.Contains(rep.Error, "moved by 0") {
		t.Errorf("Error %q, want the counter refused", rep.Error)
	}
	e.Effects = func(context.Context) (int64, error) { return 0, fmt.Errorf("boom") }
	if rep := run(t, d, e); !strings.Contains(rep.Error, "boom") {
		t.Errorf("Error %q, want the counter's error", rep.Error)
	}
}

// Without a second principal, rule 7 is SKIP and says what to give.
func TestNoPrincipal2(t *testing.T) {
	t.Parallel()
	_, d, e := setup(t, checktest.Config{}, false, true)
	e.Principal2 = nil
	rep := run(t, d, e)
	want := checktest.Expected(checktest.Correct)
	want[7] = check.Skip
	assertStatuses(t, rep, want)
	if !strings.Contains(rep.Results[6].Reason, "--principal2") {
		t.Errorf("rule 7's reason %q does not say how to give a principal", rep.Results[6].Reason)
	}
}

// A body that is not a JSON object: rule 3 needs Body2, rule 4 is SKIP.
func TestNotJSON(t *testing.T) {
	t.Parallel()
	_, d, e := setup(t, checktest.Config{}, false, true)
	e.Body = []byte(`["to","bob"]`)
	rep := run(t, d, e) // the fixture refuses it: 400
	if !strings.Contains(rep.Error, "400") {
		t.Fatalf("Error %q, want the probe's 400", rep.Error)
	}
	// A handler that accepts anything, with a text body.
	mux := http.NewServeMux()
	mux.HandleFunc("POST /t", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	rep = run(t, check.HandlerDoer(mux), check.Endpoint{URL: "/t", Body: []byte("plain text"), Concurrency: 2})
	if rep.Status(3) != check.Skip || rep.Status(4) != check.Skip {
		t.Errorf("rules 3 and 4: %s, %s; want SKIP for a text body", rep.Status(3), rep.Status(4))
	}
	if !strings.Contains(rep.Results[2].Reason, "--d2") {
		t.Errorf("rule 3's reason %q does not say how to give a second body", rep.Results[2].Reason)
	}
}

// Body2 replaces the derived second body.
func TestBody2(t *testing.T) {
	t.Parallel()
	_, d, e := setup(t, checktest.Config{}, false, true)
	e.Body2 = []byte(`{"to":"carol","amount":10}`)
	rep := run(t, d, e)
	assertStatuses(t, rep, checktest.Expected(checktest.Correct))
	if ev := strings.Join(rep.Results[2].Evidence, "\n"); !strings.Contains(ev, "the given second body") {
		t.Errorf("rule 3's evidence does not say the second body was given:\n%s", ev)
	}
}

func TestEndpointValidation(t *testing.T) {
	t.Parallel()
	d := check.HandlerDoer(http.NotFoundHandler())
	for _, e := range []check.Endpoint{
		{},
		{URL: "/x", Concurrency: 1},
		{URL: "/x", Header: http.Header{"Idempotency-Key": {"k"}}},
		{URL: "/x", Timeout: -1},
	} {
		if _, err := check.Run(context.Background(), d, e); err == nil {
			t.Errorf("Run(%+v): no error", e)
		}
	}
}

// The report's JSON form has the fields the documentation names.
func TestReportJSON(t *testing.T) {
	t.Parallel()
	_, d, e := setup(t, checktest.Config{Defect: checktest.GlobalNamespace}, false, true)
	rep := run(t, d, e)
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Method, URL, Effects string
		Counted              bool
		Rules                []struct {
			Rule                 int
			Name, Status, Reason string
			EffectsBefore        *int64 `json:"effects_before"`
			Exchanges            []struct {
				Status int
				Digest string
			}
		}
		EffectsCaused int64 `json:"effects_caused"`
		Fail          int
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Method != "POST" || len(back.Rules) != 8 || back.Rules[6].Name != "other-principal" ||
		back.Rules[6].Status != "FAIL" || back.Fail != 1 || back.EffectsCaused == 0 ||
		len(back.Rules[0].Exchanges) != 2 || len(back.Rules[0].Exchanges[0].Digest) != 12 || back.Rules[0].EffectsBefore == nil {
		t.Errorf("JSON report lacks what it should hold:\n%s", b)
	}
}

func TestWriteText(t *testing.T) {
	t.Parallel()
	_, d, e := setup(t, checktest.Config{Defect: checktest.Conflict409}, false, true)
	rep := run(t, d, e)
	rep.Name = "payments"
	var b bytes.Buffer
	if err := check.WriteText(&b, []*check.Report{rep, rep}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"idem check payments: POST /payments", "RULE", "STATUS", "1 retry", "FAIL", "2 concurrent", "PASS",
		"summary: 8 rules: 5 PASS, 1 FAIL, 1 WARN, 1 SKIP; effects caused: ",
		"total: 2 endpoints: 10 PASS, 2 FAIL", "effects: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestRules(t *testing.T) {
	t.Parallel()
	rs := check.Rules()
	if len(rs) != 8 {
		t.Fatalf("%d rules, want 8", len(rs))
	}
	for i, r := range rs {
		if r.Rule != i+1 || r.Name == "" || r.Title == "" {
			t.Errorf("rule %d: %+v", i+1, r)
		}
	}
}

// A handler that panics is an answer-less exchange, not a crash.
func TestHandlerDoerPanic(t *testing.T) {
	t.Parallel()
	d := check.HandlerDoer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	if _, err := d.Do(context.Background(), &check.Request{Method: "POST", URL: "/x"}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("err = %v, want the panic", err)
	}
}

// Package idemtest audits the duplicate path of your own HTTP handlers in
// a Go test: the requests a retrying client, a concurrent duplicate, a
// careless client and a second principal send, each judged by a rule,
// with the evidence. It is the engine of the idem check command (see
// docs/CHECK.md), run in process against an http.Handler instead of over
// the network, and it imports only the standard library and idem's core.
//
//	func TestTransfersAreIdempotent(t *testing.T) {
//		h := newServer(t) // your handler: authentication, idemhttp, routes
//		idemtest.Check(t, h, idemtest.Endpoint{
//			Path:       "/transfers",
//			Body:       `{"from":"a","to":"b","amount":5}`,
//			Header:     http.Header{"Authorization": {"Bearer alice"}},
//			Principal2: http.Header{"Authorization": {"Bearer bob"}},
//			Effects:    func() (int, error) { return countTransfers(t) },
//		})
//	}
//
// The rules, in short (docs/CHECK.md says what each needs for PASS,
// WARN, FAIL and SKIP):
//
//  1. Retry with the same key: one effect, the original status and body
//     byte for byte; a header that differs, or no Idempotent-Replayed,
//     is a WARN (duplicate safe, replay not faithful).
//  2. Concurrent duplicates (Concurrency requests, one key, released
//     together): one effect; the others 409 with Retry-After (WARN if
//     absent) or the replay; no 5xx.
//  3. Same key, different body: 422 (another 4xx is a WARN), no effect;
//     SKIP when the identical retry is refused just the same.
//  4. Same JSON, members reordered, other whitespace: answered as an
//     identical retry; a 4xx is a WARN; SKIP when the identical retry is
//     refused.
//  5. Missing key: 400 (a 2xx when KeyOptional).
//  6. Malformed keys (256 characters, two header lines, a list,
//     non-ASCII): 400, no effect; one accepted and kept safe is a WARN,
//     one that runs again or is not replayed a FAIL.
//  7. Another principal, same key, same body: its own execution, and
//     principal 1's retry afterwards still its original answer.
//  8. No key, twice: duplicating is a WARN; an answer taken from another
//     request's record is a FAIL.
//
// Without Effects, executions are inferred from the answers (distinct 2xx
// bodies and Location headers, the replay marker), which is weaker: give a
// counter when you can.
package idemtest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/check"
)

// Endpoint is the endpoint to audit. Only Path and Body are needed; the
// zero value of every other field means its default.
type Endpoint struct {
	// Method defaults to POST.
	Method string
	// Path is the request target, such as "/transfers" or "/orders?x=1".
	Path string
	// Body is a request the handler accepts with a 2xx. When it is JSON
	// and Header has no Content-Type, application/json is sent.
	Body string
	// Body2 is rule 3's different request. Defaults to Body with one JSON
	// member changed (its first number plus one, else its first string
	// with "-2" appended, else its first boolean negated).
	Body2 string
	// Header is sent with every request: the principal's credentials,
	// Content-Type, anything the handler needs.
	Header http.Header
	// KeyHeader defaults to Idempotency-Key.
	KeyHeader string
	// Principal2 is a second principal's credentials for rule 7: each of
	// its headers replaces the header of that name in Header. Without it
	// rule 7 is SKIP.
	Principal2 http.Header
	// KeyOptional declares that requests without a key are accepted.
	KeyOptional bool
	// Concurrency is rule 2's number of concurrent duplicates. Defaults
	// to 20.
	Concurrency int
	// Effects returns the number of effects so far (rows created, say),
	// one per execution of the handler's work. It must count an effect by
	// the time the handler returns, and nothing else may change it during
	// the audit. Nil: executions are inferred from the answers.
	Effects func() (int, error)
	// Timeout bounds each request. Defaults to 30 seconds.
	Timeout time.Duration
}

// Report is an audit's verdicts and evidence, as idem check --json prints
// them.
type Report = check.Report

// Result is one rule's verdict and evidence.
type Result = check.Result

// Exchange is one request sent by the audit and the answer it got.
type Exchange = check.Exchange

// Status is a rule's verdict: Pass, Fail, Warn or Skip.
type Status = check.Status

// The verdicts.
const (
	Pass = check.Pass
	Fail = check.Fail
	Warn = check.Warn
	Skip = check.Skip
)

// Run audits the endpoint e of h and returns the report; h is called in
// the calling process, from several goroutines at once for rule 2. The
// error is for an Endpoint it cannot use. An audit that had to stop (the
// handler refused Body, the counter failed) returns a report whose Error
// says why.
func Run(ctx context.Context, h http.Handler, e Endpoint) (*Report, error) {
	ce := check.Endpoint{
		Method:      e.Method,
		URL:         e.Path,
		Header:      e.Header,
		Body:        []byte(e.Body),
		KeyHeader:   e.KeyHeader,
		Principal2:  e.Principal2,
		KeyOptional: e.KeyOptional,
		Concurrency: e.Concurrency,
		Timeout:     e.Timeout,
	}
	if ce.URL == "" {
		ce.URL = "/"
	}
	if e.Body2 != "" {
		ce.Body2 = []byte(e.Body2)
	}
	if e.Effects != nil {
		ce.Effects = func(context.Context) (int64, error) {
			n, err := e.Effects()
			return int64(n), err
		}
		ce.EffectsSource = "Endpoint.Effects"
	}
	return check.Run(ctx, check.HandlerDoer(h), ce)
}

// Check audits the endpoint e of h under t: each rule that fails is a
// t.Errorf with its evidence, every other verdict a t.Logf, and an audit
// that had to stop is a t.Errorf saying why. WARN does not fail the test;
// look at the returned report to be stricter.
func Check(t testing.TB, h http.Handler, e Endpoint) *Report {
	t.Helper()
	rep, err := Run(t.Context(), h, e)
	if err != nil {
		t.Fatalf("idemtest: %v", err)
		return nil
	}
	name := rep.Method + " " + rep.URL
	if rep.Error != "" {
		t.Errorf("idemtest: %s: the audit stopped: %s", name, rep.Error)
	}
	for _, res := range rep.Results {
		evidence := ""
		if len(res.Evidence) > 0 {
			evidence = "\n\t" + strings.Join(res.Evidence, "\n\t")
		}
		if res.Status == Fail {
			t.Errorf("idemtest: %s: rule %d %s: FAIL: %s%s", name, res.Rule, res.Name, res.Reason, evidence)
		} else {
			t.Logf("idemtest: %s: rule %d %s: %s: %s%s", name, res.Rule, res.Name, res.Status, res.Reason, evidence)
		}
	}
	t.Logf("idemtest: %s: %s; effects: %s", name, rep.Summary(), rep.Effects)
	return rep
}

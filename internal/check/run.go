package check

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Run audits the endpoint e through d and returns the report. Its error
// is for an Endpoint it cannot use; an audit that had to stop (the
// endpoint refused the request, the counter failed) returns a report whose
// Error says why, with the rules it did not run as SKIP.
func Run(ctx context.Context, d Doer, e Endpoint) (*Report, error) {
	e, err := e.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{d: d, e: e}
	rep := &Report{Name: e.Name, Method: e.Method, URL: e.URL, KeyHeader: e.KeyHeader, Counted: e.Effects != nil}
	start := time.Now()
	defer func() { rep.Millis = ms(time.Since(start)) }()

	var first int64
	if rep.Counted {
		rep.Effects = "counted"
		if e.EffectsSource != "" {
			rep.Effects += " by " + e.EffectsSource
		}
		if first, err = r.count(ctx); err != nil {
			rep.Error = err.Error()
		}
	}
	if rep.Error == "" {
		if err := r.probe(ctx, rep); err != nil {
			rep.Error = err.Error()
		}
	}
	for _, rule := range rules {
		res := Result{Rule: rule.n, Name: rule.name, Title: rule.title}
		if rep.Error != "" {
			res.set(Skip, "not run: the audit stopped")
			rep.Results = append(rep.Results, res)
			continue
		}
		t0 := time.Now()
		r.res, r.rule, r.t0, r.window = &res, rule.n, t0, ""
		if err := rule.run(r, ctx); err != nil {
			rep.Error = fmt.Sprintf("rule %d: %v", rule.n, err)
			res.set(Skip, "stopped: %v", err)
		}
		res.Millis = ms(time.Since(t0))
		if b, a := res.EffectsBefore, res.EffectsAfter; b != nil && a != nil {
			res.note("effects%s: %d → %d (%+d)", r.window, *b, *a, *a-*b)
		}
		rep.Results = append(rep.Results, res)
	}
	rep.tally()
	if rep.Counted {
		if last, err := r.count(ctx); err == nil {
			rep.EffectsCaused = last - first
		} else if rep.Error == "" {
			rep.Error = err.Error()
		}
	} else {
		rep.EffectsCaused = r.inferred()
	}
	return rep, nil
}

// runner is one audit in progress.
type runner struct {
	d Doer
	e Endpoint
	// distinct is whether two executions answer differently (status,
	// Location or body), so that answers tell executions apart, and
	// bodyDistinct whether their status and body alone do (inferred mode
	// only; see runID).
	distinct, bodyDistinct bool

	mu       sync.Mutex
	accepted []acceptedAnswer // every 2xx answer of the audit, in order

	// keyless is rule 5's request without a key, for rule 8.
	keyless *Exchange

	res    *Result // the rule running
	rule   int     // its number, 0 for the probe
	t0     time.Time
	window string // which requests the rule's effects figures span, if not all
}

// acceptedAnswer is a 2xx answer and the request it answered.
type acceptedAnswer struct {
	rule int
	x    Exchange
}

// runID is what identifies an execution by its answer, without a
// counter: the status and body when they told the probe's two executions
// apart (then a replay that changes a header is still one execution),
// else the status, Location and body.
func (r *runner) runID(x Exchange) [32]byte {
	if r.bodyDistinct {
		return x.answer
	}
	return x.sum
}

// sameRun reports whether two answers are, inferred from them, one
// execution.
func (r *runner) sameRun(x, y Exchange) bool {
	return x.Error == "" && y.Error == "" && r.runID(x) == r.runID(y)
}

// inferred is the estimate of the effects caused, without a counter: the
// distinct 2xx answers not marked as replays when answers tell
// executions apart, else every 2xx answer not marked as a replay.
func (r *runner) inferred() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[[32]byte]bool{}
	var unmarked int64
	for _, a := range r.accepted {
		if !a.x.marked() {
			seen[r.runID(a.x)] = true
			unmarked++
		}
	}
	if r.distinct {
		return int64(len(seen))
	}
	return unmarked
}

// earlier returns a 2xx answer sent before the running rule that is, by
// its answer, the same execution as x: another request's recorded
// result. It needs answers that tell executions apart.
func (r *runner) earlier(x Exchange) (acceptedAnswer, bool) {
	if !r.distinct || !x.ok() {
		return acceptedAnswer{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.accepted {
		if a.rule != r.rule && r.runID(a.x) == r.runID(x) {
			return a, true
		}
	}
	return acceptedAnswer{}, false
}

// where names an earlier answer: "rule 5's no key" or "the probe's probe".
func (a acceptedAnswer) where() string {
	if a.rule == 0 {
		return fmt.Sprintf("the probe (sha256 %s)", a.x.Digest)
	}
	return fmt.Sprintf("rule %d's request %q (sha256 %s)", a.rule, a.x.Label, a.x.Digest)
}

// key returns a fresh random key.
func key(tag string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "idem-check-" + hex.EncodeToString(b[:]) + "-" + tag
}

// headers returns the request's headers with the key header set to
// values (none: absent); principal2 swaps in the second principal.
func (r *runner) headers(principal2 bool, values ...string) http.Header {
	h := r.e.Header.Clone()
	if principal2 {
		for name, v := range r.e.Principal2 {
			h[http.CanonicalHeaderKey(name)] = append([]string(nil), v...)
		}
	}
	if len(values) > 0 {
		h[r.e.KeyHeader] = values
	}
	return h
}

// send sends one request and returns the exchange, recording it in the
// running rule (or in the probe when res is nil).
func (r *runner) send(ctx context.Context, label, keyShown string, h http.Header, body []byte) Exchange {
	ctx, cancel := withTimeout(ctx, r.e.Timeout)
	defer cancel()
	start := time.Now()
	res, err := r.d.Do(ctx, &Request{Method: r.e.Method, URL: r.e.URL, Header: h, Body: body})
	took := time.Since(start)
	x := newExchange(label, keyShown, res, err, start.Sub(r.t0), took)
	r.mu.Lock()
	defer r.mu.Unlock()
	if x.ok() {
		r.accepted = append(r.accepted, acceptedAnswer{r.rule, x})
	}
	if r.res != nil {
		r.res.Exchanges = append(r.res.Exchanges, x)
	}
	return x
}

// withKey sends body with key k (principal2: as the second principal).
func (r *runner) withKey(ctx context.Context, label, k string, principal2 bool, body []byte) Exchange {
	return r.send(ctx, label, k, r.headers(principal2, k), body)
}

// count reads the counter; without one it returns 0.
func (r *runner) count(ctx context.Context) (int64, error) {
	if r.e.Effects == nil {
		return 0, nil
	}
	ctx, cancel := withTimeout(ctx, r.e.Timeout)
	defer cancel()
	n, err := r.e.Effects(ctx)
	if err != nil {
		return 0, fmt.Errorf("effects counter: %w", err)
	}
	return n, nil
}

// counted reads the counter into the rule's EffectsBefore (before) or
// EffectsAfter, and returns it.
func (r *runner) counted(ctx context.Context, before bool) (int64, error) {
	n, err := r.count(ctx)
	if err != nil || r.e.Effects == nil {
		return n, err
	}
	v := n
	if before {
		r.res.EffectsBefore = &v
	} else {
		r.res.EffectsAfter = &v
	}
	return n, nil
}

// probe checks that the endpoint accepts the request (and, with a counter,
// that one accepted request is one effect) and, without a counter,
// whether answers tell executions apart.
func (r *runner) probe(ctx context.Context, rep *Report) error {
	r.t0 = time.Now()
	before, err := r.count(ctx)
	if err != nil {
		return err
	}
	k := key("probe")
	x := r.withKey(ctx, "probe", k, false, r.e.Body)
	rep.Probe = append(rep.Probe, x)
	if !x.ok() {
		return fmt.Errorf("the endpoint did not accept the request (%s): give a request it accepts (method, body, credentials); nothing was audited", x)
	}
	if r.e.Effects != nil {
		after, err := r.count(ctx)
		if err != nil {
			return err
		}
		if after-before != 1 {
			return fmt.Errorf("the effects counter moved by %d (%d → %d) for one accepted request: it must count this endpoint's effects, one per execution, and nothing else may change it during the audit", after-before, before, after)
		}
		return nil
	}
	y := r.withKey(ctx, "probe 2", key("probe2"), false, r.e.Body)
	rep.Probe = append(rep.Probe, y)
	if !y.ok() {
		return fmt.Errorf("the endpoint accepted the request once, then answered %s", y)
	}
	r.distinct, r.bodyDistinct = !x.same(y), !x.sameAnswer(y)
	switch {
	case r.bodyDistinct:
		rep.Effects = "inferred from the answers: two executions under two keys answered different bodies, so an answer with the same status and body is taken for a replay (a header that differs is a defect of fidelity) and a different one for an execution (weaker than a counter: a server that re-executes and answers the first body looks like a replay)"
	case r.distinct:
		rep.Effects = "inferred from the answers: two executions under two keys answered the same status and body but another Location, so only an identical answer (status, Location, body) is taken for a replay, and one with another Location for an execution (weaker than a counter)"
	default:
		rep.Effects = "inferred from the answers, weakly: two executions under two keys answered the same bytes, so only Idempotent-Replayed: true can tell a replay from a re-execution; give an effects counter"
	}
	return nil
}

// noAnswer returns the exchanges that got no answer, as one string.
func noAnswer(xs ...Exchange) string {
	var s []string
	for _, x := range xs {
		if x.Error != "" {
			s = append(s, x.Label+": "+x.Error)
		}
	}
	return strings.Join(s, "; ")
}

func is4xx(s int) bool { return s >= 400 && s < 500 }
func is5xx(s int) bool { return s >= 500 }

package check

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// rule is one check of the audit.
type rule struct {
	n     int
	name  string
	title string
	run   func(r *runner, ctx context.Context) error
}

// rules are the audit's checks, in the order they run. Each uses keys of
// its own, so that none sees another's records.
var rules = []rule{
	{1, "retry", "Retry with the same key", (*runner).retry},
	{2, "concurrent", "Concurrent duplicates with one key", (*runner).concurrent},
	{3, "different-body", "Same key, different body", (*runner).differentBody},
	{4, "reordered-json", "Same JSON, members reordered, other whitespace", (*runner).reordered},
	{5, "missing-key", "Missing key", (*runner).missingKey},
	{6, "malformed-key", "Malformed keys", (*runner).malformedKey},
	{7, "other-principal", "Another principal, same key, same body", (*runner).otherPrincipal},
	{8, "no-key-twice", "No key at all, twice", (*runner).noKeyTwice},
}

// Rules returns each rule's number, name and title, in order.
func Rules() []Result {
	out := make([]Result, len(rules))
	for i, r := range rules {
		out[i] = Result{Rule: r.n, Name: r.name, Title: r.title}
	}
	return out
}

// how says where the effects figures come from.
func (r *runner) how() string {
	if r.e.Effects != nil {
		return "counted"
	}
	return "inferred"
}

// around reads the counter, runs f, and reads it again; it returns the
// difference (0 without a counter).
func (r *runner) around(ctx context.Context, f func()) (int64, error) {
	before, err := r.counted(ctx, true)
	if err != nil {
		return 0, err
	}
	f()
	after, err := r.counted(ctx, false)
	return after - before, err
}

// firstAccepted sends body with k and reports whether it was accepted;
// when it was not, the rule is SKIP.
func (r *runner) firstAccepted(ctx context.Context, label, k string) (Exchange, bool) {
	x := r.withKey(ctx, label, k, false, r.e.Body)
	r.res.note("%s", x)
	if !x.ok() {
		r.res.set(Skip, "the first request was not accepted (%d %s), although the probe's was: nothing to compare with", x.Status, x.Error)
		return x, false
	}
	return x, true
}

// Rule 1: a retry gets the original status and body byte for byte, one
// effect, and says it is a replay.
func (r *runner) retry(ctx context.Context) error {
	k := key("r1")
	var first, second Exchange
	accepted := true
	delta, err := r.around(ctx, func() {
		if first, accepted = r.firstAccepted(ctx, "first", k); accepted {
			second = r.withKey(ctx, "retry", k, false, r.e.Body)
			r.res.note("%s", second)
		}
	})
	switch {
	case err != nil:
		return err
	case !accepted:
		return nil
	case second.Error != "":
		r.res.set(Fail, "the retry got no answer: %s", second.Error)
	case second.Status != first.Status:
		r.res.set(Fail, "the retry was answered %d, the first attempt %d: not the original response", second.Status, first.Status)
	case !second.same(first):
		r.res.set(Fail, "the retry's answer differs from the first (sha256 %s, then %s): not a byte-for-byte replay%s", first.Digest, second.Digest, ranAgain(r, delta, 2))
	case r.e.Effects != nil && delta != 1:
		r.res.set(Fail, "%d effects for one request and its retry, want 1", delta)
	case r.e.Effects == nil && !r.distinct && !second.marked():
		r.res.set(Warn, "the retry got the same bytes but no Idempotent-Replayed: true, and answers do not tell executions apart: whether it ran again cannot be told without an effects counter")
	case !second.marked():
		r.res.set(Warn, "the retry got the original %d and body byte for byte, one effect (%s), but no Idempotent-Replayed: true", second.Status, r.how())
	default:
		r.res.set(Pass, "the retry got the original %d and body byte for byte with Idempotent-Replayed: true; one effect (%s)", second.Status, r.how())
	}
	return nil
}

// ranAgain adds ", and it ran again" when the counter shows want effects.
func ranAgain(r *runner, delta, want int64) string {
	if r.e.Effects != nil && delta >= want {
		return fmt.Sprintf("; %d effects: it ran again", delta)
	}
	if r.e.Effects == nil && r.distinct {
		return ": it ran again (inferred)"
	}
	return ""
}

// Rule 2: N concurrent requests with one key make one effect; the others
// are refused as in flight (409 with Retry-After) or get the replay.
func (r *runner) concurrent(ctx context.Context) error {
	k := key("r2")
	n := r.e.Concurrency
	xs := make([]Exchange, n)
	delta, err := r.around(ctx, func() {
		h := make([]http.Header, n)
		for i := range h {
			h[i] = r.headers(false, k)
		}
		start := make(chan struct{})
		var ready, done sync.WaitGroup
		for i := range n {
			ready.Add(1)
			done.Go(func() {
				ready.Done()
				<-start
				xs[i] = r.send(ctx, fmt.Sprintf("#%d", i+1), k, h[i], r.e.Body)
			})
		}
		ready.Wait()
		close(start)
		done.Wait()
	})
	if err != nil {
		return err
	}
	statuses := map[int]int{}
	var ok []Exchange
	var fives, conflicts, noRetryAfter, others, errs int
	firstStart, lastEnd := xs[0].Start, 0.0
	for _, x := range xs {
		firstStart = min(firstStart, x.Start)
		lastEnd = max(lastEnd, x.Start+x.Millis)
		switch {
		case x.Error != "":
			errs++
			continue
		case x.ok():
			ok = append(ok, x)
		case x.Status == http.StatusConflict:
			conflicts++
			if x.RetryAfter == "" {
				noRetryAfter++
			}
		case is5xx(x.Status):
			fives++
		default:
			others++
		}
		statuses[x.Status]++
	}
	bodies := map[[32]byte]bool{}
	for _, x := range ok {
		bodies[x.sum] = true
	}
	replays := 0
	for _, x := range ok {
		if x.marked() {
			replays++
		}
	}
	r.res.note("%d requests with one key released together, answered within %.0f ms: %s", n, lastEnd-firstStart, tally(statuses))
	r.res.note("%d distinct 2xx answers; %d marked Idempotent-Replayed: true; %d × 409 without Retry-After", len(bodies), replays, noRetryAfter)
	unmarked := len(ok) - replays
	switch {
	case errs > 0:
		r.res.set(Fail, "%d of %d requests got no answer: %s", errs, n, noAnswer(xs...))
	case r.e.Effects != nil && delta != 1:
		r.res.set(Fail, "%d effects for %d concurrent requests with one key, want 1 (%s)", delta, n, tally(statuses))
	case len(bodies) > 1 && r.e.Effects != nil:
		// The counter says it ran once: the duplicates got another answer
		// than the original, not the replay.
		r.res.set(Fail, "one effect (counted), but %d different 2xx answers to one key: the duplicates did not get the original answer byte for byte (%s)", len(bodies), tally(statuses))
	case len(bodies) > 1:
		r.res.set(Fail, "%d different 2xx answers to one key: it ran more than once (%s)", len(bodies), tally(statuses))
	case len(ok) == 0:
		r.res.set(Fail, "none of %d concurrent requests was answered 2xx (%s): the one that runs must answer", n, tally(statuses))
	case fives > 0:
		r.res.set(Fail, "%d × 5xx among %d concurrent duplicates (%s): a duplicate must be answered 409 or replayed", fives, n, tally(statuses))
	case r.e.Effects == nil && !r.distinct && unmarked > 1:
		r.res.set(Warn, "%d identical 2xx answers not marked as replays, and answers do not tell executions apart: whether it ran more than once cannot be told without an effects counter", unmarked)
	case others > 0:
		r.res.set(Warn, "one effect (%s), but %d answers were neither 409 nor the replay (%s)", r.how(), others, tally(statuses))
	case noRetryAfter > 0:
		r.res.set(Warn, "one effect (%s), but %d × 409 without Retry-After: clients cannot tell when to retry", r.how(), noRetryAfter)
	default:
		r.res.set(Pass, "one effect (%s) for %d concurrent requests: %s", r.how(), n, tally(statuses))
	}
	return nil
}

// tally writes statuses as "1 × 201, 19 × 409", by status.
func tally(statuses map[int]int) string {
	var parts []string
	for s := 100; s < 600; s++ {
		if c := statuses[s]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d × %d", c, s))
		}
	}
	return strings.Join(parts, ", ")
}

// Rule 3: the same key with another request is refused with 422, runs
// nothing, and does not replay the first result.
func (r *runner) differentBody(ctx context.Context) error {
	body2, what := r.e.Body2, "the given second body"
	if body2 == nil {
		var err error
		if body2, what, err = changeOne(r.e.Body); err != nil {
			r.res.set(Skip, "no different body: %v; give one (--d2, Body2)", err)
			return nil
		}
	}
	r.res.note("second body: %s", what)
	k := key("r3")
	first, accepted := r.firstAccepted(ctx, "first", k)
	if !accepted {
		return nil
	}
	var second Exchange
	r.window = " (around the different body)"
	delta, err := r.around(ctx, func() {
		second = r.withKey(ctx, "different body", k, false, body2)
		r.res.note("%s", second)
	})
	switch {
	case err != nil:
		return err
	case second.Error != "":
		r.res.set(Fail, "no answer: %s", second.Error)
	case r.e.Effects != nil && delta != 0:
		r.res.set(Fail, "the different request ran under the used key (%d effect(s), answered %d)", delta, second.Status)
	case second.ok() && second.same(first):
		r.res.set(Fail, "the first request's result was replayed for a different request (%d, sha256 %s)", second.Status, second.Digest)
	case second.ok():
		r.res.set(Fail, "the different request was accepted under the used key (%d)", second.Status)
	case second.Status == http.StatusUnprocessableEntity:
		r.res.set(Pass, "refused with 422, no effect (%s)", r.how())
	case is4xx(second.Status):
		r.res.set(Warn, "refused with %d, no effect (%s); 422 expected", second.Status, r.how())
	default:
		r.res.set(Fail, "answered %d; a 4xx (422) expected", second.Status)
	}
	return nil
}

// Rule 4: the same JSON with members reordered and other whitespace is
// the same request: answered as an identical retry is, without running.
func (r *runner) reordered(ctx context.Context) error {
	body4, what, err := reorder(r.e.Body)
	if err != nil {
		r.res.set(Skip, "%v", err)
		return nil
	}
	r.res.note("reordered body: %s", what)
	k := key("r4")
	first, accepted := r.firstAccepted(ctx, "first", k)
	if !accepted {
		return nil
	}
	r.window = " (around the reordered request and the identical retry)"
	before, err := r.counted(ctx, true)
	if err != nil {
		return err
	}
	re := r.withKey(ctx, "reordered", k, false, body4)
	r.res.note("%s", re)
	mid, err := r.count(ctx)
	if err != nil {
		return err
	}
	exact := r.withKey(ctx, "identical retry", k, false, r.e.Body)
	r.res.note("%s", exact)
	if _, err := r.counted(ctx, false); err != nil {
		return err
	}
	ranAgain := re.ok() && !re.same(first) && r.distinct
	if r.e.Effects != nil {
		ranAgain = mid-before != 0
	}
	switch {
	case re.Error != "" || exact.Error != "":
		r.res.set(Fail, "no answer: %s", noAnswer(re, exact))
	case ranAgain:
		r.res.set(Fail, "the reordered body ran again (answered %d, sha256 %s; %s): the key did not protect it", re.Status, re.Digest, r.how())
	case is5xx(re.Status):
		r.res.set(Fail, "the reordered body was answered %d", re.Status)
	case re.ok() && re.same(first):
		r.res.set(Pass, "the reordered body got the original %d and body byte for byte: the same request", re.Status)
	case re.Status == exact.Status && (!re.ok() || re.same(exact)):
		r.res.set(Pass, "the reordered body was answered as the identical retry was (%d): the same request", re.Status)
	case is4xx(re.Status):
		r.res.set(Warn, "the reordered body was refused (%d) where the identical retry got %d: the server compares bytes, so a client that serializes members in another order loses its intent", re.Status, exact.Status)
	default:
		r.res.set(Warn, "the reordered body was answered %d, the identical retry %d", re.Status, exact.Status)
	}
	return nil
}

// Rule 5: a request without a key is refused with 400 and runs nothing,
// unless the endpoint declares the key optional.
func (r *runner) missingKey(ctx context.Context) error {
	var x Exchange
	delta, err := r.around(ctx, func() {
		x = r.send(ctx, "no key", "", r.headers(false), r.e.Body)
		r.res.note("%s", x)
	})
	if err != nil {
		return err
	}
	if r.e.KeyOptional {
		switch {
		case x.Error != "":
			r.res.set(Fail, "no answer: %s", x.Error)
		case x.ok():
			r.res.set(Pass, "accepted without a key (%d), as declared: the key is optional, and such a request runs unprotected", x.Status)
		case is5xx(x.Status):
			r.res.set(Fail, "answered %d without a key", x.Status)
		default:
			r.res.set(Warn, "the key was declared optional, but a request without one was answered %d", x.Status)
		}
		return nil
	}
	switch {
	case x.Error != "":
		r.res.set(Fail, "no answer: %s", x.Error)
	case r.e.Effects != nil && delta != 0:
		r.res.set(Fail, "ran without a key (%d effect(s), answered %d): a retry of it would run again", delta, x.Status)
	case x.ok():
		r.res.set(Fail, "accepted without a key (%d): a retry of it would run again (if the key is optional, say so)", x.Status)
	case x.Status == http.StatusBadRequest:
		r.res.set(Pass, "refused with 400, no effect (%s)", r.how())
	case is4xx(x.Status):
		r.res.set(Warn, "refused with %d, no effect (%s); 400 expected", x.Status, r.how())
	default:
		r.res.set(Fail, "answered %d; 400 expected", x.Status)
	}
	return nil
}

// Rule 6: malformed keys are refused with 400 and run nothing.
func (r *runner) malformedKey(ctx context.Context) error {
	long := key("r6-long")
	long += strings.Repeat("x", 256-len(long))
	cases := []struct {
		label, shown string
		values       []string
	}{
		{"256 characters", fmt.Sprintf("%s… (%d characters)", long[:24], len(long)), []string{long}},
		{"two header lines", "two lines", []string{key("r6-a"), key("r6-b")}},
		{"a list", "a list", []string{`"` + key("r6-c") + `", "` + key("r6-d") + `"`}},
		{"non-ASCII", "non-ASCII", []string{"clé-" + key("r6-e")}},
	}
	xs := make([]Exchange, len(cases))
	delta, err := r.around(ctx, func() {
		for i, c := range cases {
			xs[i] = r.send(ctx, c.label, c.shown, r.headers(false, c.values...), r.e.Body)
			r.res.note("%s", xs[i])
		}
	})
	if err != nil {
		return err
	}
	var accepted, fives, other []string
	for _, x := range xs {
		switch {
		case x.Error != "":
		case x.ok():
			accepted = append(accepted, fmt.Sprintf("%s (%d)", x.Label, x.Status))
		case is5xx(x.Status) || !is4xx(x.Status):
			fives = append(fives, fmt.Sprintf("%s (%d)", x.Label, x.Status))
		case x.Status != http.StatusBadRequest:
			other = append(other, fmt.Sprintf("%s (%d)", x.Label, x.Status))
		}
	}
	switch {
	case noAnswer(xs...) != "":
		r.res.set(Fail, "no answer: %s", noAnswer(xs...))
	case r.e.Effects != nil && delta != 0:
		r.res.set(Fail, "malformed keys ran: %d effects (%s)", delta, strings.Join(append(accepted, other...), ", "))
	case len(accepted) > 0:
		r.res.set(Fail, "accepted: %s; a malformed key must be refused with 400", strings.Join(accepted, ", "))
	case len(fives) > 0:
		r.res.set(Fail, "answered %s; 400 expected", strings.Join(fives, ", "))
	case len(other) > 0:
		r.res.set(Warn, "refused, no effect (%s), but not with 400: %s", r.how(), strings.Join(other, ", "))
	default:
		r.res.set(Pass, "all %d refused with 400, no effect (%s)", len(xs), r.how())
	}
	return nil
}

// Rule 7: a second principal with the same key and body gets its own
// execution, never the first principal's recorded response, and the
// first principal's retry never gets the second's.
func (r *runner) otherPrincipal(ctx context.Context) error {
	if len(r.e.Principal2) == 0 {
		r.res.set(Skip, "no second principal: give one (--principal2 'Authorization: Bearer …', Principal2)")
		return nil
	}
	k := key("r7")
	a, accepted := r.firstAccepted(ctx, "principal 1", k)
	if !accepted {
		return nil
	}
	var b, a2 Exchange
	r.window = " (around principal 2's request)"
	delta, err := r.around(ctx, func() {
		b = r.withKey(ctx, "principal 2", k, true, r.e.Body)
		r.res.note("%s", b)
	})
	if err != nil {
		return err
	}
	a2 = r.withKey(ctx, "principal 1 again", k, false, r.e.Body)
	r.res.note("%s", a2)
	switch {
	case b.Error != "" || a2.Error != "":
		r.res.set(Fail, "no answer: %s", noAnswer(b, a2))
	case b.Status == http.StatusUnauthorized || b.Status == http.StatusForbidden:
		r.res.set(Warn, "the second principal was refused (%d): isolation not checked; give a credential the endpoint accepts", b.Status)
	case b.ok() && b.marked():
		r.res.set(Fail, "the second principal got a replay (Idempotent-Replayed: %s, %d, sha256 %s; first principal's: sha256 %s): keys are shared between principals", b.Replayed, b.Status, b.Digest, a.Digest)
	case b.ok() && b.same(a) && ((r.e.Effects == nil && r.distinct) || (r.e.Effects != nil && delta == 0)):
		r.res.set(Fail, "the second principal received the first principal's recorded response byte for byte (sha256 %s; %s): keys are shared between principals", b.Digest, r.how())
	case b.ok() && r.e.Effects != nil && delta != 1:
		r.res.set(Fail, "the second principal's request made %d effects, want its own 1", delta)
	case b.Status == http.StatusConflict || b.Status == http.StatusUnprocessableEntity:
		r.res.set(Fail, "the second principal was refused with %d because of the first principal's key: keys are shared between principals", b.Status)
	case is5xx(b.Status) || (!b.ok() && !is4xx(b.Status)):
		r.res.set(Fail, "the second principal was answered %d", b.Status)
	case !b.ok():
		r.res.set(Warn, "the second principal was answered %d: isolation not checked", b.Status)
	case r.e.Effects == nil && b.same(a):
		r.res.set(Warn, "the second principal got the same bytes as the first, unmarked, and answers do not tell executions apart: whether it ran on its own cannot be told without an effects counter")
	case a2.ok() && a2.same(b) && !b.same(a):
		r.res.set(Fail, "the first principal's retry received the second principal's response (sha256 %s)", a2.Digest)
	default:
		r.res.set(Pass, "the second principal's request ran on its own (%d, sha256 %s, not the first's %s; %s); the first principal's retry did not get it", b.Status, b.Digest, a.Digest, r.how())
	}
	return nil
}

// Rule 8: two requests without a key, as information: does the endpoint
// duplicate them? Never a FAIL.
func (r *runner) noKeyTwice(ctx context.Context) error {
	var x, y Exchange
	delta, err := r.around(ctx, func() {
		x = r.send(ctx, "no key", "", r.headers(false), r.e.Body)
		y = r.send(ctx, "no key again", "", r.headers(false), r.e.Body)
		r.res.note("%s", x)
		r.res.note("%s", y)
	})
	if err != nil {
		return err
	}
	dup := func(d bool) { r.res.Duplicated = &d }
	switch {
	case x.Error != "" || y.Error != "":
		r.res.set(Warn, "no answer: %s", noAnswer(x, y))
	case !x.ok() && !y.ok() && is4xx(x.Status) && is4xx(y.Status):
		dup(false)
		r.res.set(Pass, "requests without a key are refused (%d, %d): a client that forgets the key cannot duplicate", x.Status, y.Status)
	case !x.ok() || !y.ok():
		r.res.set(Warn, "requests without a key were answered %d and %d", x.Status, y.Status)
	case r.e.Effects != nil && delta >= 2:
		dup(true)
		r.res.set(Warn, "duplicates without a key: two identical requests made %d effects; every retry without a key runs again", delta)
	case r.e.Effects != nil:
		dup(false)
		r.res.set(Pass, "two identical requests without a key made %d effect(s): the endpoint deduplicates without a key", delta)
	case !x.same(y):
		dup(true)
		r.res.set(Warn, "duplicates without a key: two identical requests got different answers (sha256 %s, %s): each ran (inferred); every retry without a key runs again", x.Digest, y.Digest)
	case r.distinct:
		dup(false)
		r.res.set(Pass, "two identical requests without a key got the same answer: deduplicated (inferred)")
	default:
		r.res.set(Warn, "two identical requests without a key got the same bytes, and answers do not tell executions apart: whether it duplicates cannot be told without an effects counter")
	}
	return nil
}

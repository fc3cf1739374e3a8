package check

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Rule 1: a retry makes no second effect (duplicate safety) and gets the
// original status and body byte for byte, the original headers, and
// Idempotent-Replayed: true (replay fidelity). A second effect or another
// status or body is a FAIL; one effect with a header that differs, or
// without the mark, is a WARN.
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
		return nil
	}
	wrong := answerDiff(first, second)
	safe := ""
	if r.e.Effects != nil {
		safe = "; one effect (counted): a wrong replay, not a second execution"
	}
	switch {
	case r.e.Effects != nil && delta != 1:
		r.res.set(Fail, "%d effects for one request and its retry, want 1: it ran again (the retry's answer differs in: %s)", delta, diff(first, second))
	case r.e.Effects == nil && r.distinct && second.ok() && !second.marked() && !r.sameRun(first, second):
		r.res.set(Fail, "the retry's answer differs from the first (%s), unmarked: it ran again (inferred)", diff(first, second))
	case second.Status != first.Status:
		r.res.set(Fail, "the retry was answered %d, the first attempt %d: not the original response%s", second.Status, first.Status, safe)
	case len(wrong) > 0:
		r.res.set(Fail, "the retry's answer is not the original byte for byte (%s)%s", strings.Join(wrong, "; "), safe)
	case r.e.Effects == nil && !r.distinct && !second.marked():
		r.res.set(Warn, "the retry got the same bytes but no Idempotent-Replayed: true, and answers do not tell executions apart: whether it ran again cannot be told without an effects counter")
	default:
		if f := fidelity(headerDiff(first, second), second); f != "" {
			r.res.set(Warn, "duplicate safe: one effect (%s), the original %d and body byte for byte; replay fidelity: %s", r.how(), second.Status, f)
			return nil
		}
		r.res.set(Pass, "the retry got the original %d and body byte for byte, its headers, and Idempotent-Replayed: true; one effect (%s)", second.Status, r.how())
	}
	return nil
}

// fidelity is what a replay got wrong beside its status and body: the
// headers that differ and a missing mark; "" when nothing.
func fidelity(headers []string, replay Exchange) string {
	if !replay.marked() {
		headers = append(headers, "no Idempotent-Replayed: true")
	}
	return strings.Join(headers, "; ")
}

// Rule 2: N concurrent requests with one key make one effect; the others
// are refused as in flight (409 with Retry-After) or get the replay.
// Fidelity is judged apart, as in rule 1: a replay whose header differs
// from the original's is a WARN.
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
	// The original is the 2xx not marked as a replay (the first, if
	// several), else the first 2xx; every other 2xx is compared with it.
	var orig Exchange
	if i := slices.IndexFunc(ok, func(x Exchange) bool { return !x.marked() }); i >= 0 {
		orig = ok[i]
	} else if len(ok) > 0 {
		orig = ok[0]
	}
	var runs []Exchange // one per execution, inferred from the answers
	var wrong []Exchange
	var wrongWhat string
	headers := map[string]int{}
	replays := 0
	for _, x := range ok {
		if x.marked() {
			replays++
		}
		if !slices.ContainsFunc(runs, func(y Exchange) bool { return r.sameRun(x, y) }) {
			runs = append(runs, x)
		}
		if x.Label == orig.Label {
			continue
		}
		if d := answerDiff(orig, x); len(d) > 0 {
			if len(wrong) == 0 {
				wrongWhat = fmt.Sprintf("%s: %s; %s: %s", orig.Label, orig.Digest, x.Label, strings.Join(d, "; "))
			}
			wrong = append(wrong, x)
		}
		for _, h := range headerDiff(orig, x) {
			headers[h]++
		}
	}
	r.res.note("%d requests with one key released together, answered within %.0f ms: %s", n, lastEnd-firstStart, tally(statuses))
	r.res.note("%d distinct 2xx answers (status and body); %d marked Idempotent-Replayed: true; %d × 409 without Retry-After", countDistinct(ok), replays, noRetryAfter)
	unmarked := len(ok) - replays
	switch {
	case errs > 0:
		r.res.set(Fail, "%d of %d requests got no answer: %s", errs, n, noAnswer(xs...))
	case r.e.Effects != nil && delta != 1:
		r.res.set(Fail, "%d effects for %d concurrent requests with one key, want 1 (%s)", delta, n, tally(statuses))
	case r.e.Effects == nil && len(runs) > 1:
		r.res.set(Fail, "%d different 2xx answers to one key: it ran more than once (inferred; %s and %s differ in: %s) (%s)", len(runs), runs[0].Label, runs[1].Label, diff(runs[0], runs[1]), tally(statuses))
	case len(wrong) > 0:
		// The counter says it ran once: the duplicates got another answer
		// than the original, not the replay.
		r.res.set(Fail, "one effect (%s), but %d of the %d 2xx answers are not the original byte for byte (%s): wrong replays (%s)", r.how(), len(wrong), len(ok), wrongWhat, tally(statuses))
	case len(ok) == 0:
		r.res.set(Fail, "none of %d concurrent requests was answered 2xx (%s): the one that runs must answer", n, tally(statuses))
	case fives > 0:
		r.res.set(Fail, "%d × 5xx among %d concurrent duplicates (%s): a duplicate must be answered 409 or replayed", fives, n, tally(statuses))
	case r.e.Effects == nil && !r.distinct && unmarked > 1:
		r.res.set(Warn, "%d identical 2xx answers not marked as replays, and answers do not tell executions apart: whether it ran more than once cannot be told without an effects counter", unmarked)
	case others > 0 || noRetryAfter > 0 || len(headers) > 0:
		var why []string
		for _, h := range slices.Sorted(maps.Keys(headers)) {
			why = append(why, fmt.Sprintf("%s (%d of %d replays)", h, headers[h], len(ok)-1))
		}
		if others > 0 {
			why = append(why, fmt.Sprintf("%d answers were neither 409 nor the replay", others))
		}
		if noRetryAfter > 0 {
			why = append(why, fmt.Sprintf("%d × 409 without Retry-After: clients cannot tell when to retry", noRetryAfter))
		}
		r.res.set(Warn, "duplicate safe: one effect (%s) for %d concurrent requests (%s); but %s", r.how(), n, tally(statuses), strings.Join(why, "; "))
	default:
		r.res.set(Pass, "one effect (%s) for %d concurrent requests: %s", r.how(), n, tally(statuses))
	}
	return nil
}

// countDistinct is how many different answers (status and body) xs holds.
func countDistinct(xs []Exchange) int {
	seen := map[[32]byte]bool{}
	for _, x := range xs {
		seen[x.answer] = true
	}
	return len(seen)
}

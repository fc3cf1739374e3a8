package check

import (
	"context"
	"net/http"
)

// Rule 3: the same key with another request is refused with 422, runs
// nothing, and does not replay the first result. An identical retry
// follows as the baseline: when it is refused with the same status, the
// refusal says nothing about the body, and the rule is SKIP (unless the
// different request ran, which FAILs whatever the baseline).
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
	if err != nil {
		return err
	}
	exact := r.withKey(ctx, "identical retry", k, false, r.e.Body)
	r.res.note("%s", exact)
	switch {
	case second.Error != "":
		r.res.set(Fail, "no answer: %s", second.Error)
	case r.e.Effects != nil && delta != 0:
		r.res.set(Fail, "the different request ran under the used key (%d effect(s), answered %d)", delta, second.Status)
	case second.ok() && second.sameAnswer(first):
		r.res.set(Fail, "the first request's result was replayed for a different request (%d, sha256 %s)", second.Status, second.Digest)
	case second.ok():
		r.res.set(Fail, "the different request was accepted under the used key (%d)", second.Status)
	case !is4xx(second.Status):
		r.res.set(Fail, "answered %d; a 4xx (422) expected", second.Status)
	case exact.Error != "":
		r.res.set(Skip, "the different request was refused (%d), but the identical retry got no answer (%s): nothing to tell the refusal from", second.Status, exact.Error)
	case exact.Status == second.Status:
		same := "other bytes"
		if exact.sameAnswer(second) {
			same = "the same bytes"
		}
		r.res.set(Skip, "the different request was refused (%d), but so was the identical retry (%d, %s): the refusal is not evidence that the server compares requests (rule 1 judges the retry); no effect (%s)", second.Status, exact.Status, same, r.how())
	case second.Status == http.StatusUnprocessableEntity:
		r.res.set(Pass, "refused with 422, no effect (%s), where the identical retry got %d", r.how(), exact.Status)
	default:
		r.res.set(Warn, "refused with %d, no effect (%s), where the identical retry got %d; 422 expected", second.Status, r.how(), exact.Status)
	}
	return nil
}

// Rule 4: the same JSON with members reordered and other whitespace is
// the same request: answered as an identical retry is, without running.
// The identical retry is the baseline: when it is refused, "answered as
// the identical retry" would be true of a server that refuses every retry,
// and the rule is SKIP (unless the reordered body ran, or got a 5xx).
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
	ranAgain := re.ok() && !re.marked() && !r.sameRun(re, first) && r.distinct
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
	case re.ok() && re.sameAnswer(first):
		r.res.set(Pass, "the reordered body got the original %d and body byte for byte: the same request", re.Status)
	case !exact.ok():
		r.res.set(Skip, "the identical retry was refused (%d), the reordered body answered %d: with no replay to compare with, whether the server takes reordered JSON for the same request cannot be told (rule 1 judges the retry)", exact.Status, re.Status)
	case re.sameAnswer(exact):
		r.res.set(Pass, "the reordered body was answered as the identical retry was (%d, sha256 %s): the same request", re.Status, re.Digest)
	case is4xx(re.Status):
		r.res.set(Warn, "the reordered body was refused (%d) where the identical retry got %d: the server compares bytes, so a client that serializes members in another order loses its intent", re.Status, exact.Status)
	default:
		r.res.set(Warn, "the reordered body was answered %d, the identical retry %d (they differ in: %s)", re.Status, exact.Status, diff(exact, re))
	}
	return nil
}

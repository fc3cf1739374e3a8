package check

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Rule 7: a second principal with the same key and body gets its own
// execution, never the first principal's recorded response; and its use
// of the key changes nothing for the first principal, whose retry after
// it gets its original answer byte for byte with no new effect. The
// first principal's retry before the second principal's request is the
// baseline: when even that one is not the original answer (rule 1's
// finding), the retry after cannot be blamed on the second principal.
func (r *runner) otherPrincipal(ctx context.Context) error {
	if len(r.e.Principal2) == 0 {
		r.res.set(Skip, "no second principal: give one (--principal2 'Authorization: Bearer …', Principal2)")
		return nil
	}
	k := key("r7")
	var a, base, b, again Exchange
	var dBase, dB, dAgain int64
	accepted := true
	step := func(f func()) (int64, error) {
		before, err := r.count(ctx)
		if err != nil {
			return 0, err
		}
		f()
		after, err := r.count(ctx)
		return after - before, err
	}
	var serr error
	total, err := r.around(ctx, func() {
		if a, accepted = r.firstAccepted(ctx, "principal 1", k); !accepted {
			return
		}
		steps := []struct {
			d *int64
			f func()
		}{
			{&dBase, func() { base = r.withKey(ctx, "principal 1 again, before principal 2", k, false, r.e.Body) }},
			{&dB, func() { b = r.withKey(ctx, "principal 2", k, true, r.e.Body) }},
			{&dAgain, func() { again = r.withKey(ctx, "principal 1 again, after principal 2", k, false, r.e.Body) }},
		}
		for _, s := range steps {
			if *s.d, serr = step(s.f); serr != nil {
				return
			}
		}
	})
	switch {
	case err != nil:
		return err
	case serr != nil:
		return serr
	case !accepted:
		return nil
	}
	for _, x := range []Exchange{base, b, again} {
		r.res.note("%s", x)
	}
	counted := r.e.Effects != nil
	if counted {
		r.res.note("effects: %+d for principal 1's retry before principal 2, %+d for principal 2, %+d for principal 1's retry after; %+d over the rule, want +2", dBase, dB, dAgain, total)
	}
	// The baseline holds when principal 1's first retry got its original
	// status and body and ran nothing.
	baseline := base.ok() && base.sameAnswer(a) && (!counted || dBase == 0)
	ranAgain := counted && dAgain != 0 ||
		!counted && r.distinct && again.ok() && !again.marked() && !r.sameRun(again, a)
	switch {
	case base.Error != "" || b.Error != "" || again.Error != "":
		r.res.set(Fail, "no answer: %s", noAnswer(base, b, again))
	case b.ok() && b.marked():
		r.res.set(Fail, "the second principal got a replay (Idempotent-Replayed: %s, %d, sha256 %s; first principal's: sha256 %s): keys are shared between principals", b.Replayed, b.Status, b.Digest, a.Digest)
	case b.ok() && b.sameAnswer(a) && ((!counted && r.distinct) || (counted && dB == 0)):
		r.res.set(Fail, "the second principal received the first principal's recorded response byte for byte (sha256 %s; %s): keys are shared between principals", b.Digest, r.how())
	case b.ok() && counted && dB != 1:
		r.res.set(Fail, "the second principal's request made %d effects, want its own 1", dB)
	case b.Status == http.StatusConflict || b.Status == http.StatusUnprocessableEntity:
		r.res.set(Fail, "the second principal was refused with %d because of the first principal's key: keys are shared between principals", b.Status)
	case is5xx(b.Status) || (!b.ok() && !is4xx(b.Status)):
		r.res.set(Fail, "the second principal was answered %d", b.Status)
	case baseline && ranAgain:
		r.res.set(Fail, "after the second principal used the key, the first principal's retry ran again (%s; its answer differs in: %s), where its retry before got the original: the second principal's request took over the first's record", effectsOf(counted, dAgain, total), diff(a, again))
	case baseline && !again.sameAnswer(a):
		r.res.set(Fail, "after the second principal used the key, the first principal's retry got %d, not its original answer (it differs in: %s), where its retry before got the original: the second principal's request changed the first's record", again.Status, diff(a, again))
	case is5xx(base.Status) || is5xx(again.Status):
		r.res.set(Fail, "the first principal's retry was answered %d, then %d", base.Status, again.Status)
	case b.Status == http.StatusUnauthorized || b.Status == http.StatusForbidden:
		r.res.set(Warn, "the second principal was refused (%d): isolation not checked; give a credential the endpoint accepts", b.Status)
	case !b.ok():
		r.res.set(Warn, "the second principal was answered %d: isolation not checked", b.Status)
	case !counted && b.sameAnswer(a):
		r.res.set(Warn, "the second principal got the same bytes as the first, unmarked, and answers do not tell executions apart: whether it ran on its own cannot be told without an effects counter")
	case !baseline && !(base.ok() && again.sameAnswer(base) && !ranAgain && (!counted || dBase == 0)):
		r.res.set(Warn, "the second principal's request ran on its own (%d, sha256 %s; %s), but the first principal's retry got no replay of its original even before the second principal (%d, sha256 %s; rule 1's finding), so whether the second principal's use of the key changed the first's record cannot be told (after it: %d, sha256 %s)", b.Status, b.Digest, r.how(), base.Status, base.Digest, again.Status, again.Digest)
	default:
		what := "its original status and body"
		if !baseline {
			what = "the same answer as before the second principal (rule 1 judges that answer)"
		}
		if h := headerDiff(base, again); len(h) > 0 {
			r.res.set(Warn, "the second principal's request ran on its own, and the first principal's retry after it got %s, but its headers changed after the second principal's request: %s", what, strings.Join(h, "; "))
			return nil
		}
		r.res.set(Pass, "the second principal's request ran on its own (%d, sha256 %s, not the first's %s; %s); the first principal's retry after it got %s, no new effect", b.Status, b.Digest, a.Digest, r.how(), what)
	}
	return nil
}

// effectsOf says what the counter saw for the first principal's retry.
func effectsOf(counted bool, again, total int64) string {
	if !counted {
		return "inferred: another answer, unmarked"
	}
	return fmt.Sprintf("%+d effect(s) for it, %+d over the rule, want +2", again, total)
}

package check

import (
	"context"
	"fmt"
)

// Rule 8: two requests without a key, as information: does the endpoint
// duplicate them (WARN)? They carry a body no other request of the audit
// sends (changeBy), so a record made by another rule cannot match them:
// a server that answers them with another request's recorded result
// (rule 5's, say) loses every later request without a key, and FAILs.
func (r *runner) noKeyTwice(ctx context.Context) error {
	body, what, err := changeBy(r.e.Body, 2, "-8")
	if err != nil {
		body, what = r.e.Body, fmt.Sprintf("the request's own body (%v): a server that matches requests without a key to an earlier one by their body is not told apart", err)
	}
	r.res.note("body: %s", what)
	var x, y Exchange
	delta, err := r.around(ctx, func() {
		x = r.send(ctx, "no key", "", r.headers(false), body)
		y = r.send(ctx, "no key again", "", r.headers(false), body)
		r.res.note("%s", x)
		r.res.note("%s", y)
	})
	if err != nil {
		return err
	}
	dup := func(d bool) { r.res.Duplicated = &d }
	prev, answeredFromRecord := r.earlier(x)
	if !answeredFromRecord {
		prev, answeredFromRecord = r.earlier(y)
	}
	counted := r.e.Effects != nil
	switch {
	case x.Error != "" || y.Error != "":
		r.res.set(Warn, "no answer: %s", noAnswer(x, y))
	case answeredFromRecord:
		dup(false)
		r.res.set(Fail, "a request without a key, with a body no other request sent, was answered with another request's recorded result, that of %s (answers %d sha256 %s, %d sha256 %s): every later request without a key of this principal is lost", prev.where(), x.Status, x.Digest, y.Status, y.Digest)
	case x.ok() && y.ok() && counted && delta == 0:
		dup(false)
		whose := "another request's result"
		if r.keyless != nil && r.keyless.ok() && x.sameAnswer(*r.keyless) {
			whose = fmt.Sprintf("another request's result (the very answer of rule 5's request without a key, sha256 %s)", x.Digest)
		}
		r.res.set(Fail, "two requests without a key, with a body no other request sent, were answered %d and %d with no effect (counted): they got %s, so a request without a key is lost", x.Status, y.Status, whose)
	case !x.ok() && !y.ok() && is4xx(x.Status) && is4xx(y.Status) && r.keyless != nil && r.keyless.ok():
		r.res.set(Warn, "requests without a key were refused (%d, %d), although rule 5's request without a key was accepted (%d): a request without a key is refused because of an earlier one, so a second, different one is never run", x.Status, y.Status, r.keyless.Status)
	case !x.ok() && !y.ok() && is4xx(x.Status) && is4xx(y.Status):
		dup(false)
		r.res.set(Pass, "requests without a key are refused (%d, %d): a client that forgets the key cannot duplicate", x.Status, y.Status)
	case !x.ok() || !y.ok():
		r.res.set(Warn, "requests without a key were answered %d and %d", x.Status, y.Status)
	case counted && delta >= 2:
		dup(true)
		r.res.set(Warn, "duplicates without a key: two identical requests made %d effects; every retry without a key runs again", delta)
	case counted:
		dup(false)
		r.res.set(Pass, "two identical requests without a key made %d effect: the endpoint deduplicates without a key", delta)
	case !r.sameRun(x, y) && !y.marked():
		dup(true)
		r.res.set(Warn, "duplicates without a key: two identical requests got different answers (%s): each ran (inferred); every retry without a key runs again", diff(x, y))
	case r.distinct:
		dup(false)
		r.res.set(Pass, "two identical requests without a key got the same answer: deduplicated (inferred)")
	default:
		r.res.set(Warn, "two identical requests without a key got the same bytes, and answers do not tell executions apart: whether it duplicates cannot be told without an effects counter")
	}
	return nil
}

package check

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Rule 5: a request without a key is refused with 400 and runs nothing,
// unless the endpoint declares the key optional. It carries a body of its
// own (changeBy), and an answer that is another request's recorded result
// FAILs either way.
func (r *runner) missingKey(ctx context.Context) error {
	body, what, err := changeBy(r.e.Body, 3, "-5")
	if err != nil {
		body, what = r.e.Body, fmt.Sprintf("the request's own body (%v)", err)
	}
	r.res.note("body: %s", what)
	var x Exchange
	delta, err := r.around(ctx, func() {
		x = r.send(ctx, "no key", "", r.headers(false), body)
		r.res.note("%s", x)
	})
	if err != nil {
		return err
	}
	r.keyless = &x
	if prev, ok := r.earlier(x); ok {
		r.res.set(Fail, "the request without a key was answered %d with another request's recorded result, that of %s: a request without a key is matched to a record it does not own", x.Status, prev.where())
		return nil
	}
	if r.e.KeyOptional {
		switch {
		case x.Error != "":
			r.res.set(Fail, "no answer: %s", x.Error)
		case x.ok() && r.e.Effects != nil && delta != 1:
			r.res.set(Fail, "accepted without a key (%d), with a body no other request sent, but it made %d effects, want 1", x.Status, delta)
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

// Rule 6: keys outside idem's key policy (256 characters, two header
// lines, a list, non-ASCII). The policy is idem's, not the contract's: a
// server may accept such a key (WARN) as long as it keeps it safe. Each
// accepted one is retried with the same key: a second execution, a wrong
// replay (another status or body, a refusal) or a 5xx is a FAIL; all
// refused with 400 and nothing done is a PASS.
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
	var fails, warns, refused []string
	failf := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	warnf := func(format string, args ...any) { warns = append(warns, fmt.Sprintf(format, args...)) }
	var cerr error
	_, err := r.around(ctx, func() {
		for _, c := range cases {
			before, err := r.count(ctx)
			if err != nil {
				cerr = err
				return
			}
			x := r.send(ctx, c.label, c.shown, r.headers(false, c.values...), r.e.Body)
			r.res.note("%s", x)
			var y Exchange
			if x.ok() {
				y = r.send(ctx, c.label+" again", c.shown, r.headers(false, c.values...), r.e.Body)
				r.res.note("%s", y)
			}
			after, err := r.count(ctx)
			if err != nil {
				cerr = err
				return
			}
			delta := after - before
			switch {
			case x.Error != "" || y.Error != "":
				failf("%s: no answer (%s)", c.label, noAnswer(x, y))
			case is5xx(x.Status) || (!x.ok() && !is4xx(x.Status)):
				failf("%s: answered %d", c.label, x.Status)
			case !x.ok() && r.e.Effects != nil && delta != 0:
				failf("%s: refused (%d) but ran (%d effect(s)): a retry would run again", c.label, x.Status, delta)
			case !x.ok() && x.Status != http.StatusBadRequest:
				warnf("%s: refused with %d, 400 expected", c.label, x.Status)
			case !x.ok():
				refused = append(refused, c.label)
			case r.e.Effects != nil && delta != 1:
				failf("%s: accepted (%d), and its retry with the same key made %d effects in all, want 1: a second execution", c.label, x.Status, delta)
			case r.e.Effects == nil && r.distinct && y.ok() && !y.marked() && !r.sameRun(x, y):
				failf("%s: accepted (%d), and its retry with the same key ran again (inferred; they differ in: %s)", c.label, x.Status, diff(x, y))
			case is5xx(y.Status):
				failf("%s: accepted (%d), and its retry with the same key answered %d", c.label, x.Status, y.Status)
			case !y.sameAnswer(x):
				failf("%s: accepted (%d), and its retry with the same key was not replayed (%s): a wrong replay", c.label, x.Status, diff(x, y))
			case r.e.Effects == nil && !r.distinct && !y.marked():
				warnf("%s: accepted (%d); its retry got the same bytes, unmarked, and answers do not tell executions apart: whether it ran again cannot be told", c.label, x.Status)
			default:
				warnf("%s: accepted (%d), its retry replayed, one effect (%s)", c.label, x.Status, r.how())
			}
		}
	})
	switch {
	case err != nil:
		return err
	case cerr != nil:
		return cerr
	case len(fails) > 0:
		r.res.set(Fail, "%s", strings.Join(append(fails, warns...), "; "))
	case len(warns) > 0:
		r.res.set(Warn, "no second execution, wrong replay or 5xx, but not every malformed key was refused with 400: %s", strings.Join(warns, "; "))
	default:
		r.res.set(Pass, "all %d refused with 400, no effect (%s)", len(refused), r.how())
	}
	return nil
}

package check

import (
	"context"
	"fmt"
	"strings"
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

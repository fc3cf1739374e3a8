package history

import (
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is the verdict on a history.
type Result struct {
	// Ok is whether the history is linearizable; when false, Violations
	// names the keys that are not.
	Ok bool
	// Keys and Ops count the keys and the operations given to
	// porcupine; Dropped counts those left out (see Check): attempts of
	// unknown outcome for which an earlier one stands, and 409s that an
	// attempt overlaps, which are legal in any state.
	Keys, Ops, Dropped int
	// Violations are the keys whose histories are not linearizable, in
	// order.
	Violations []string
	// TimedOut is set when porcupine gave up before a verdict: Ok and
	// Violations are then the direct check's (see direct), which decides
	// the same model without a search.
	TimedOut bool

	info porcupine.LinearizationInfo
}

// DefaultTimeout bounds a check (Check's timeout of 0).
const DefaultTimeout = time.Minute

// Check checks ops against the model of one key (see the package doc),
// partitioned by key, within timeout (0: DefaultTimeout).
//
// An attempt of unknown outcome is open-ended: it may take effect, and
// hold the key, at any time after its start, so it overlaps every later
// attempt of the key, and porcupine may linearize it anywhere after its
// start. A 409 is legal only while an attempt of the key that was not
// itself refused overlaps it. Of a key's attempts of unknown outcome, only the earliest is
// given to porcupine: its effect (the key may have executed unseen) is
// the only one any of them can have, and it can take it at any point the
// later ones could; the others still count for the 409 rule.
func Check(ops []Op, timeout time.Duration) Result {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	h, res := operations(ops)
	verdict, info := porcupine.CheckOperationsVerbose(model, h, timeout)
	res.info = info
	switch verdict {
	case porcupine.Ok:
		res.Ok = true
	case porcupine.Unknown:
		// The search gave up (a storm of many overlapping attempts of
		// one key): the verdict of the direct check, which is the same
		// (see direct).
		res.TimedOut = true
		res.Violations = direct(h)
		res.Ok = len(res.Violations) == 0
	default:
		// Name the keys: check each partition on its own.
		for _, part := range model.Partition(h) {
			if porcupine.CheckOperationsTimeout(model, part, timeout) == porcupine.Illegal {
				res.Violations = append(res.Violations, part[0].Input.(input).key)
			}
		}
		slices.Sort(res.Violations)
	}
	return res
}

// operations turns ops into porcupine's operations, as Check describes,
// and counts them in a Result.
func operations(ops []Op) ([]porcupine.Operation, Result) {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b Op) int { return a.Start.Compare(b.Start) })
	var base time.Time
	var last int64
	if len(ops) > 0 {
		base = ops[0].Start
	}
	ts := func(t time.Time) int64 { return int64(t.Sub(base)) }
	for _, op := range ops {
		last = max(last, ts(op.End), ts(op.Start))
	}
	open := last + 1 // the end of an attempt of unknown outcome

	byKey := map[string][]int{}
	var keys []string
	for i, op := range ops {
		if _, ok := byKey[op.Key]; !ok {
			keys = append(keys, op.Key)
		}
		byKey[op.Key] = append(byKey[op.Key], i)
	}
	res := Result{Keys: len(keys)}
	var h []porcupine.Operation
	for _, k := range keys {
		idx := byKey[k]
		end := func(i int) int64 {
			if ops[i].Outcome == Unknown {
				return open
			}
			return max(ts(ops[i].End), ts(ops[i].Start))
		}
		seenUnknown := false
		for _, i := range idx {
			op := ops[i]
			if op.Outcome == Unknown {
				if seenUnknown {
					res.Dropped++
					continue
				}
				seenUnknown = true
			}
			overlapped := false
			if op.Outcome == InFlight {
				for _, j := range idx {
					if j != i && ops[j].Outcome != InFlight && ts(ops[j].Start) <= end(i) && ts(op.Start) <= end(j) {
						overlapped = true
						break
					}
				}
			}
			if op.Outcome == InFlight && overlapped {
				// Legal whatever the key's state: it reads nothing,
				// changes nothing, and may be linearized anywhere in
				// its interval; left out so that a storm's many 409s do
				// not blow up porcupine's search.
				res.Dropped++
				continue
			}
			h = append(h, porcupine.Operation{
				ClientId: op.Client,
				Input:    input{key: k, overlapped: overlapped},
				Call:     ts(op.Start),
				Output:   op.Answer,
				Return:   end(i),
			})
		}
	}
	res.Ops = len(h)
	return h, res
}

// direct decides the model (model.go) for each key of h without a
// search, and returns the keys that violate it, in order. The model's
// rules make that possible: an attempt of unknown outcome and an
// overlapped 409 are legal anywhere, and a replay in any state, so a key's
// history is linearizable exactly when its 409s are overlapped, its
// completed answers all carry one result, at most one of them is a first
// execution, and that one can be placed before all the others: it starts
// before each of them ends.
func direct(h []porcupine.Operation) []string {
	var bad []string
	for _, part := range model.Partition(h) {
		if !directKey(part) {
			bad = append(bad, part[0].Input.(input).key)
		}
	}
	slices.Sort(bad)
	return bad
}

func directKey(ops []porcupine.Operation) bool {
	var res string
	var firsts []porcupine.Operation
	for _, op := range ops {
		a := op.Output.(Answer)
		switch a.Outcome {
		case Unknown:
			continue
		case InFlight:
			if !op.Input.(input).overlapped {
				return false
			}
			continue
		}
		if r := result(a); res == "" {
			res = r
		} else if r != res {
			return false
		}
		if !a.Replayed {
			firsts = append(firsts, op)
		}
	}
	switch len(firsts) {
	case 0:
		return true
	case 1:
	default:
		return false
	}
	e := firsts[0]
	for _, op := range ops {
		if a := op.Output.(Answer); a.Outcome == Completed && a.Replayed && op.Return < e.Call {
			return false
		}
	}
	return true
}

// WriteHTML writes porcupine's visualization of the checked history (the
// longest linearization of each key, and where it fails) to path.
func (r Result) WriteHTML(path string) error {
	return porcupine.VisualizePath(model, r.info, path)
}

func (r Result) String() string {
	switch {
	case r.Ok:
		return fmt.Sprintf("linearizable: %d keys, %d operations (%d left out: redundant unknown outcomes and overlapped 409s)", r.Keys, r.Ops, r.Dropped)
	case r.TimedOut && r.Ok:
		return fmt.Sprintf("linearizable (porcupine's search timed out; decided by the direct check): %d keys, %d operations (%d left out)", r.Keys, r.Ops, r.Dropped)
	default:
		return fmt.Sprintf("NOT linearizable: %d of %d keys violate the model: %v", len(r.Violations), r.Keys, r.Violations)
	}
}

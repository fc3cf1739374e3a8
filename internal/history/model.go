package history

import (
	"fmt"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// input is an operation's input to the model: its key, and whether
// another attempt of the key overlapped it in time (the one condition
// under which a 409 is legal; it is a fact of real time, not of the
// key's state, so it is computed from the history before the check).
type input struct {
	key        string
	overlapped bool
}

// state is the state of one key: Result is "" while no result is known
// (absent), else the status and body digest of its one result; Maybe is
// whether an attempt of unknown outcome may have executed while it was
// absent (a replay is then no surprise).
type state struct {
	Result string
	Maybe  bool
}

func result(a Answer) string { return strconv.Itoa(a.Status) + ":" + a.Digest }

// step is the model of one key.
func step(s state, in input, a Answer) (bool, state) {
	switch a.Outcome {
	case Unknown:
		if s.Result == "" {
			s.Maybe = true
		}
		return true, s
	case InFlight:
		return in.overlapped, s
	}
	r := result(a)
	if s.Result != "" {
		// Only a replay of the one result: a second first execution
		// or a replay that differs is a violation.
		return a.Replayed && r == s.Result, s
	}
	// A replay while no result is known is legal: the execution it
	// replays may be an attempt the client never saw, such as the one
	// net/http's transport retries by itself within a single round trip
	// of a request with an Idempotency-Key (its connection broke after
	// the server had run it).
	return true, state{Result: r}
}

// model is the porcupine model: a history partitioned by key, each key
// checked against step.
var model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		index := map[string]int{}
		var out [][]porcupine.Operation
		for _, op := range h {
			k := op.Input.(input).key
			i, ok := index[k]
			if !ok {
				i = len(out)
				index[k] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], op)
		}
		return out
	},
	Init: func() any { return state{} },
	Step: func(s, in, out any) (bool, any) {
		return step(s.(state), in.(input), out.(Answer))
	},
	Equal: func(a, b any) bool { return a.(state) == b.(state) },
	DescribeOperation: func(in, out any) string {
		i, a := in.(input), out.(Answer)
		s := i.key + ": " + a.String()
		if a.Outcome == InFlight && !i.overlapped {
			s += " (no overlapping attempt)"
		}
		return s
	},
	DescribeState: func(s any) string {
		st := s.(state)
		switch {
		case st.Result != "":
			return fmt.Sprintf("completed %.14s", st.Result)
		case st.Maybe:
			return "absent, or executed unseen"
		default:
			return "absent"
		}
	},
}

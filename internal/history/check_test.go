package history

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// at builds an operation of key from ms start to ms end after t0.
func at(key string, start, end int, a Answer) Op {
	t0 := time.Unix(1_700_000_000, 0)
	return Op{Key: key, Start: t0.Add(time.Duration(start) * time.Millisecond), End: t0.Add(time.Duration(end) * time.Millisecond), Answer: a}
}

var (
	first    = FromHTTP(201, false, []byte(`{"id":1}`), nil)
	replay   = FromHTTP(201, true, []byte(`{"id":1}`), nil)
	other    = FromHTTP(201, true, []byte(`{"id":2}`), nil)
	second   = FromHTTP(201, false, []byte(`{"id":2}`), nil)
	refused  = FromHTTP(409, false, []byte(`{"title":"in flight"}`), nil)
	lostConn = FromHTTP(0, false, nil, errors.New("connection reset by peer"))
	gateway  = FromHTTP(502, false, []byte("bad gateway"), nil)
)

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		ops  []Op
		bad  []string // the keys that violate the model; none: linearizable
	}{
		{"first then replays", []Op{at("a", 0, 10, first), at("a", 20, 30, replay), at("a", 40, 50, replay)}, nil},
		{"409 while the first runs", []Op{at("a", 0, 100, first), at("a", 10, 20, refused), at("a", 200, 210, replay)}, nil},
		{"lost answer, then replay", []Op{at("a", 0, 10, lostConn), at("a", 20, 30, replay)}, nil},
		{"lost answer, then first execution", []Op{at("a", 0, 10, lostConn), at("a", 20, 30, first), at("a", 40, 50, replay)}, nil},
		{"5xx, then first execution", []Op{at("a", 0, 10, gateway), at("a", 20, 30, first)}, nil},
		{"409 after a timed-out attempt that may still hold the key", []Op{at("a", 0, 10, lostConn), at("a", 20, 30, refused), at("a", 40, 50, replay)}, nil},
		{"keys apart", []Op{at("a", 0, 10, first), at("b", 5, 15, second), at("a", 20, 30, replay)}, nil},

		{"second execution", []Op{at("a", 0, 10, first), at("a", 20, 30, second)}, []string{"a"}},
		{"second execution, same body", []Op{at("a", 0, 10, first), at("a", 20, 30, first)}, []string{"a"}},
		{"replay that differs", []Op{at("a", 0, 10, first), at("a", 20, 30, other), at("b", 0, 10, first)}, []string{"a"}},
		{"409 without overlap", []Op{at("a", 0, 10, first), at("a", 20, 30, refused)}, []string{"a"}},
		{"409 overlapping only another 409", []Op{at("a", 0, 10, first), at("a", 20, 30, refused), at("a", 25, 35, refused)}, []string{"a"}},
		{"replay of an unseen execution", []Op{at("a", 0, 10, replay), at("a", 20, 30, replay)}, nil},
		{"first execution after a replay", []Op{at("a", 0, 10, replay), at("a", 20, 30, first)}, []string{"a"}},
		{"two concurrent first executions", []Op{at("a", 0, 100, first), at("a", 10, 90, second), at("b", 0, 10, first)}, []string{"a"}},
		{"two replays of different results after a lost answer", []Op{at("a", 0, 10, lostConn), at("a", 20, 30, replay), at("a", 40, 50, other)}, []string{"a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := Check(tt.ops, 0)
			if res.TimedOut {
				t.Fatalf("timed out: %s", res)
			}
			if res.Ok != (tt.bad == nil) || !slices.Equal(res.Violations, tt.bad) {
				t.Fatalf("got %s, want violations %v", res, tt.bad)
			}
			// The direct check, Check's verdict when porcupine times
			// out, decides the same.
			h, _ := operations(tt.ops)
			if got := direct(h); !slices.Equal(got, tt.bad) {
				t.Fatalf("direct check: violations %v, want %v", got, tt.bad)
			}
		})
	}
}

// Of many attempts of unknown outcome, only the first reaches porcupine,
// so that a long run of timeouts on one key does not explode the search;
// the verdict is the same.
func TestCheckDropsRedundantUnknowns(t *testing.T) {
	var ops []Op
	for i := range 40 {
		ops = append(ops, at("a", i*10, i*10+5, lostConn))
	}
	ops = append(ops, at("a", 1000, 1010, replay), at("a", 1020, 1030, replay))
	res := Check(ops, 0)
	if !res.Ok || res.Dropped != 39 || res.Ops != 3 {
		t.Fatalf("got %s (ops %d, dropped %d), want linearizable with 39 left out", res, res.Ops, res.Dropped)
	}
	ops = append(ops, at("a", 1040, 1050, second))
	if res := Check(ops, 0); res.Ok {
		t.Fatalf("a second execution after the replays passed: %s", res)
	}
}

// A storm too large for porcupine's search within the timeout is decided
// by the direct check: a verdict, never none.
func TestCheckTimedOutStillDecides(t *testing.T) {
	var ops []Op
	ops = append(ops, at("a", 0, 1000, first))
	for i := range 300 {
		ops = append(ops, at("a", 1+i, 1500+i, replay), at("a", 1+i, 900, refused))
	}
	ops = append(ops, at("b", 0, 10, first), at("b", 20, 30, second))
	res := Check(ops, time.Nanosecond)
	t.Logf("%s (porcupine timed out: %t)", res, res.TimedOut)
	if res.Ok || !slices.Equal(res.Violations, []string{"b"}) {
		t.Fatalf("got %s, want key b only", res)
	}
	ok := Check(ops[:len(ops)-1], time.Nanosecond)
	if !ok.Ok {
		t.Fatalf("without b's second execution: %s, want linearizable", ok)
	}
}

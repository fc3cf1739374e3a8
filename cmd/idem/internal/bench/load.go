package bench

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// op sends one request of a variant and says how it was answered: a label
// for Variant.Statuses and whether the answer is the one the variant
// expects. It reports broken invariants through runner.problem.
type op func(ctx context.Context) (label string, ok bool)

// tally accumulates the samples of one variant over its rounds.
type tally struct {
	name string

	mu       sync.Mutex
	ok, errs int
	seconds  float64
	lats     []time.Duration // of the expected answers only
	statuses map[string]int
}

func newTally(name string) *tally {
	return &tally{name: name, statuses: make(map[string]int)}
}

// sample is one request as a worker saw it.
type sample struct {
	label string
	ok    bool
	lat   time.Duration
}

func (t *tally) add(samples []sample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range samples {
		t.statuses[s.label]++
		if s.ok {
			t.ok++
			t.lats = append(t.lats, s.lat)
		} else {
			t.errs++
		}
	}
}

func (t *tally) variant() Variant {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := Variant{
		Name:     t.name,
		Requests: t.ok,
		Errors:   t.errs,
		Seconds:  round3(t.seconds),
		Statuses: t.statuses,
	}
	if t.seconds > 0 {
		v.ReqPerSec = round3(float64(t.ok) / t.seconds)
	}
	slices.Sort(t.lats)
	v.P50Ms = ms(percentile(t.lats, 0.50))
	v.P99Ms = ms(percentile(t.lats, 0.99))
	return v
}

// round runs c workers that send requests through do, closed loop, for d,
// and adds their samples to t; a measured round also adds its wall time.
// It ends early, with ctx's error, when ctx is done.
func round(ctx context.Context, t *tally, c int, d time.Duration, measured bool, do op) error {
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range c {
		wg.Go(func() {
			var samples []sample
			for ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				label, ok := do(ctx)
				samples = append(samples, sample{label, ok, time.Since(t0)})
			}
			if measured {
				t.add(samples)
			}
		})
	}
	wg.Wait()
	if measured {
		t.mu.Lock()
		t.seconds += time.Since(start).Seconds()
		t.mu.Unlock()
	}
	return ctx.Err()
}

// percentile returns the nearest-rank p-quantile of sorted; zero for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// round3 keeps three decimals, for a readable JSON report.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

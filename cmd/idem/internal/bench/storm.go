package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The storm's accounts: every storm moves 1 cent from stormSrc to stormDst,
// so stormDst's balance counts the storms' effects.
const (
	stormSrc = "storm-src"
	stormDst = "storm-dst"
)

var stormBody = fmt.Appendf(nil, `{"from":%q,"to":%q,"amount":1}`, stormSrc, stormDst)

// burst starts n goroutines, parks them at a barrier, releases them
// together and returns what each one's call of do answered, timed from its
// own start; do is told its goroutine's index.
func burst(ctx context.Context, n int, do func(ctx context.Context, i int) (answer, error)) []timed {
	out := make([]timed, n)
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	for i := range n {
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-release
			t0 := time.Now()
			a, err := do(ctx, i)
			out[i] = timed{a, err, time.Since(t0)}
		})
	}
	ready.Wait()
	close(release)
	done.Wait()
	return out
}

type timed struct {
	answer
	err error
	lat time.Duration
}

// storms runs the duplicate-storm scenarios: through the service as it
// runs (the Guard answers most duplicates in process), through the same
// service with the Guard's in-process shortcuts off (every duplicate goes
// to the store), and, where the database allows a second instance, split
// over two server instances.
func (r *runner) storms(ctx context.Context, rep *Report) error {
	st, err := r.stormScenario(ctx, "storm", []string{r.idem.URL})
	if err != nil {
		return err
	}
	st.Bar = newBar("<=", 1.5, st.Ratio, true, "p99")
	rep.Storm = st
	r.progressStorm("storm", st)

	if st, err = r.stormScenario(ctx, "storm-store", []string{r.storeOnly.URL}); err != nil {
		return err
	}
	st.Bar = newBar("<=", 1.5, st.Ratio, false, "p99, shortcuts off")
	rep.StormStore = st
	r.progressStorm("storm, Guard shortcuts off", st)

	if r.idem2 == nil {
		rep.StormTwoNote = "n/a: " + r.b.kind + " is one process per database file"
		return nil
	}
	if st, err = r.stormScenario(ctx, "storm-two", []string{r.idem.URL, r.idem2.URL}); err != nil {
		return err
	}
	st.Bar = newBar("<=", 1.5, st.Ratio, false, "p99; the bar is one effect per key")
	rep.StormTwo = &st
	r.progressStorm("storm over two instances", st)
	return nil
}

func (r *runner) progressStorm(name string, st Storm) {
	r.progress("%s: %d storms of %d: %d effects; p99 409/replay %.2fms, p99 reads %.2fms: %.2f× (%s)",
		name, st.Storms, st.Size, st.Effects, st.Answers.P99Ms, st.Reads.P99Ms, st.Ratio, st.Bar.Verdict())
}

// stormScenario runs the storms of one scenario, each with its own key,
// alternating with storms of plain reads, and checks each one's effect on
// the balance. Request i of a storm, and of a read storm, goes to
// urls[i % len(urls)].
func (r *runner) stormScenario(ctx context.Context, name string, urls []string) (Storm, error) {
	size := r.cfg.StormSize
	st := Storm{Storms: r.cfg.Storms, Size: size, Instances: len(urls)}
	answers, reads := newTally("409 or replay"), newTally("reads (GET)")
	pick := func(i int) string { return urls[i%len(urls)] }

	// Open the storm's connections once, so that no storm opens new ones.
	for range 2 {
		burst(ctx, size, func(ctx context.Context, i int) (answer, error) {
			return r.client.do(ctx, http.MethodGet, pick(i)+"/healthz", "", nil)
		})
	}
	before, err := r.client.balance(ctx, r.idem.URL, stormDst)
	if err != nil {
		return st, err
	}
	var pairs []float64 // per storm: p99 of its answers ÷ p99 of the adjacent read storm
	for i := range r.cfg.Storms {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		var readP99, answerP99 time.Duration
		readStorm := func() {
			got := burst(ctx, size, func(ctx context.Context, j int) (answer, error) {
				return r.client.do(ctx, http.MethodGet, pick(j)+"/accounts/"+accountID(0), "", nil)
			})
			readP99 = p99(got, func(timed) bool { return true })
			samples := make([]sample, 0, len(got))
			for _, g := range got {
				switch {
				case g.err != nil:
					samples = append(samples, sample{transportError(ctx), false, g.lat})
				default:
					samples = append(samples, sample{g.label(), g.status == http.StatusOK, g.lat})
				}
			}
			reads.add(samples)
		}
		keyStorm := func() error {
			key := r.runID + "-" + name + "-" + strconv.Itoa(i)
			got := burst(ctx, size, func(ctx context.Context, j int) (answer, error) {
				return r.client.do(ctx, http.MethodPost, pick(j)+"/transfers", key, stormBody)
			})
			after, err := r.client.balance(ctx, r.idem.URL, stormDst)
			if err != nil {
				return err
			}
			r.checkStorm(ctx, name, &st, answers, i, got, after-before)
			answerP99 = p99(got, func(g timed) bool { return g.err == nil && g.replayed || g.status == http.StatusConflict })
			before = after
			return nil
		}
		var err error
		if i%2 == 0 {
			err = keyStorm()
			readStorm()
		} else {
			readStorm()
			err = keyStorm()
		}
		if err != nil {
			return st, err
		}
		pairs = append(pairs, ratio(float64(answerP99), float64(readP99)))
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	st.Answers, st.Reads = answers.variant(), reads.variant()
	st.Ratio = ratio(st.Answers.P99Ms, st.Reads.P99Ms)
	slices.Sort(pairs)
	st.MedianPairRatio = pairs[len(pairs)/2]
	return st, nil
}

// checkStorm classifies the answers of storm i, whose effect on the
// destination balance was delta, and records any broken invariant: exactly
// one execution and one effect, every other answer a 409 or a replay of
// the executed answer.
func (r *runner) checkStorm(ctx context.Context, name string, st *Storm, answers *tally, i int, got []timed, delta int64) {
	st.Effects += delta
	var (
		executed [][]byte
		samples  = make([]sample, 0, len(got))
	)
	for _, g := range got {
		if g.err == nil && g.status == http.StatusCreated && !g.replayed {
			executed = append(executed, g.body)
			r.created.Add(1)
		}
	}
	st.Executed += len(executed)
	for _, g := range got {
		switch {
		case g.err != nil:
			st.Other++
			r.problem("%s %d: a request failed: %v", name, i, g.err)
			samples = append(samples, sample{transportError(ctx), false, g.lat})
		case g.status == http.StatusCreated && !g.replayed:
			// The one execution: not an "answer at once", not sampled.
		case g.status == http.StatusConflict:
			st.InFlight++
			samples = append(samples, sample{g.label(), true, g.lat})
		case g.status == http.StatusCreated && g.replayed:
			st.Replayed++
			ok := len(executed) == 1 && bytes.Equal(g.body, executed[0])
			if !ok && len(executed) == 1 {
				r.problem("%s %d: a replay answered %q, the execution %q", name, i, g.body, executed[0])
			}
			samples = append(samples, sample{g.label(), ok, g.lat})
		default:
			st.Other++
			r.problem("%s %d: a request was answered %d %s (want 201, 409 or a replay)", name, i, g.status, bytes.TrimSpace(g.body))
			samples = append(samples, sample{g.label(), false, g.lat})
		}
	}
	answers.add(samples)
	if len(executed) != 1 || delta != 1 {
		r.problem("%s %d: %d requests with one key executed %d times and moved %d cents (want exactly 1)", name, i, len(got), len(executed), delta)
		r.progress("%s %d: DUPLICATE OR MISSING EFFECT: %d executions, balance moved by %d", name, i, len(executed), delta)
	}
}

// p99 is the nearest-rank p99 latency of the answers that keep selects.
func p99(got []timed, keep func(timed) bool) time.Duration {
	var lats []time.Duration
	for _, g := range got {
		if keep(g) {
			lats = append(lats, g.lat)
		}
	}
	slices.Sort(lats)
	return percentile(lats, 0.99)
}

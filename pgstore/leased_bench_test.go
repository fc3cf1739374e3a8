package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/pgstore"
)

// benchLeased returns a store in a fresh schema with an effects table, a
// Guard and a Leased over it, and a prefix for the run's keys.
func benchLeased(b *testing.B) (*pgstore.Store, *idem.Guard, *idem.Leased) {
	b.Helper()
	s, _, _ := setup(b, nil)
	g, err := idem.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	l, err := idem.NewLeased(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	return s, g, l
}

// insertEffect writes one effect row through the transaction ctx carries:
// the atomic work's, or a local step's.
func insertEffect(ctx context.Context) error {
	tx, ok := pgstore.TxFrom(ctx)
	if !ok {
		return errors.New("no pgstore transaction in the context")
	}
	_, err := tx.Exec(ctx, `INSERT INTO effects (name) VALUES ('e')`)
	return err
}

// BenchmarkLeasedRatio compares first executions in leased mode with first
// executions in atomic mode on the same PostgreSQL, interleaved in rounds
// of 100 calls each (internal/benchpair), one caller at a time:
//
//   - Empty: a work that does nothing, in either mode (leased: Claim and
//     Complete; atomic: Begin and Commit);
//   - LocalStep: leased work that writes one effect row in one local step,
//     against atomic work that writes the same row in its transaction.
//
// It reports both rates and leased/atomic, the leased rate divided by the
// atomic one. Run it with a small -benchtime (for example 20x).
func BenchmarkLeasedRatio(b *testing.B) {
	const perRound = 100
	for _, local := range []bool{false, true} {
		b.Run(map[bool]string{false: "Empty", true: "LocalStep"}[local], func(b *testing.B) {
			_, g, l := benchLeased(b)
			ctx := context.Background()
			var seq int
			atomicWork := func(ctx context.Context) (idem.Result, error) {
				if local {
					return idem.Result{Status: 201}, insertEffect(ctx)
				}
				return idem.Result{Status: 201}, nil
			}
			leasedWork := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
				if local {
					if _, err := run.LocalStep(ctx, "write", func(ctx context.Context) ([]byte, error) {
						return nil, insertEffect(ctx)
					}); err != nil {
						return idem.Result{}, err
					}
				}
				return idem.Result{Status: 201}, nil
			}
			round := func(leased bool) time.Duration {
				start := time.Now()
				for range perRound {
					seq++
					key := fmt.Sprint("k", seq)
					var (
						replayed bool
						err      error
					)
					if leased {
						_, replayed, err = l.Do(ctx, idem.LeasedRequest{Scope: "s", Key: key}, leasedWork)
					} else {
						_, replayed, err = g.Do(ctx, idem.Request{Scope: "s", Key: key}, atomicWork)
					}
					if err != nil || replayed {
						b.Fatalf("first execution of %s: replayed=%v err=%v", key, replayed, err)
					}
				}
				return time.Since(start)
			}
			benchpair.Ratio(b, perRound, "ops",
				benchpair.Variant{Name: "atomic", Round: func() time.Duration { return round(false) }},
				benchpair.Variant{Name: "leased", Round: func() time.Duration { return round(true) }})
		})
	}
}

// BenchmarkLeasedStep measures the cost of one recovery point inside a
// running leased work, per op: Step records an output (one fenced
// statement); LocalStep opens and commits a fenced transaction around an
// empty step.
func BenchmarkLeasedStep(b *testing.B) {
	for _, local := range []bool{false, true} {
		b.Run(map[bool]string{false: "Step", true: "LocalStep"}[local], func(b *testing.B) {
			_, _, l := benchLeased(b)
			ctx := context.Background()
			out := []byte(`{"charge":"ch_123"}`)
			fn := func(context.Context) ([]byte, error) { return out, nil }
			_, _, err := l.Do(ctx, idem.LeasedRequest{Scope: "s", Key: "steps"}, func(ctx context.Context, run *idem.Run) (idem.Result, error) {
				step := run.Step
				if local {
					step = run.LocalStep
				}
				i := 0
				for b.Loop() {
					i++
					if _, err := step(ctx, fmt.Sprint("step-", i), fn); err != nil {
						return idem.Result{}, err
					}
				}
				return idem.Result{Status: 200}, nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

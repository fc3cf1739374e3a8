package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/benchpair"
	"github.com/idemkit/idem/sqlitestore"
)

// BenchmarkLeasedRatio compares, on one SQLite file and interleaved (see
// internal/benchpair), first executions of:
//
//   - FirstExecution: leased mode (a claim, then a completion: two
//     transactions) against atomic mode (one transaction), both with a
//     trivial work that writes nothing;
//
//   - RecoveryPoint: leased work with one Step (SaveStep: a third
//     transaction) against the same without it; step-ns is the extra cost
//     of one recovery point;
//
//   - LocalStep: leased work writing one row in a LocalStep (its effect and
//     recovery point in one transaction) against atomic work writing the
//     same row; local-step-ns is the extra cost of the leased call.
//
//     go test -run '^$' -bench LeasedRatio ./sqlitestore/
func BenchmarkLeasedRatio(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), &sqlitestore.Config{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			if _, err := s.DB().ExecContext(ctx, `CREATE TABLE effects (name TEXT NOT NULL)`); err != nil {
				b.Fatal(err)
			}
			g, err := idem.New(s, nil)
			if err != nil {
				b.Fatal(err)
			}
			l, err := idem.NewLeased(s, nil)
			if err != nil {
				b.Fatal(err)
			}
			const perRound = 50
			var seq int
			body := []byte(`{"ok":true}`)
			insert := func(ctx context.Context) error {
				tx, ok := sqlitestore.TxFrom(ctx)
				if !ok {
					return fmt.Errorf("no transaction")
				}
				_, err := tx.ExecContext(ctx, `INSERT INTO effects (name) VALUES ('e')`)
				return err
			}
			atomic := func(effect bool) *timed {
				return &timed{name: "atomic", round: func() error {
					seq++
					_, _, err := g.Do(ctx, idem.Request{Scope: "bench", Key: fmt.Sprintf("a-%d", seq), Fingerprint: "fp"},
						func(ctx context.Context) (idem.Result, error) {
							if effect {
								if err := insert(ctx); err != nil {
									return idem.Result{}, err
								}
							}
							return idem.Result{Status: 201, Body: body}, nil
						})
					return err
				}}
			}
			leased := func(name string, work idem.LeasedWork) *timed {
				return &timed{name: name, round: func() error {
					seq++
					_, _, err := l.Do(ctx, idem.LeasedRequest{Scope: "bench", Key: fmt.Sprintf("l-%d", seq), Fingerprint: "fp"}, work)
					return err
				}}
			}
			noStep := func(context.Context, *idem.Run) (idem.Result, error) {
				return idem.Result{Status: 201, Body: body}, nil
			}
			oneStep := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
				if _, err := run.Step(ctx, "call", func(context.Context) ([]byte, error) { return []byte("charge-1"), nil }); err != nil {
					return idem.Result{}, err
				}
				return idem.Result{Status: 201, Body: body}, nil
			}
			localStep := func(ctx context.Context, run *idem.Run) (idem.Result, error) {
				if _, err := run.LocalStep(ctx, "debit", func(ctx context.Context) ([]byte, error) { return nil, insert(ctx) }); err != nil {
					return idem.Result{}, err
				}
				return idem.Result{Status: 201, Body: body}, nil
			}
			for _, tt := range []struct {
				name        string
				base, other *timed
				extra       string
			}{
				{"FirstExecution", atomic(false), leased("leased", noStep), ""},
				{"RecoveryPoint", leased("nostep", noStep), leased("step", oneStep), "step-ns"},
				{"LocalStep", atomic(true), leased("localstep", localStep), "local-step-ns"},
			} {
				b.Run(tt.name, func(b *testing.B) {
					benchpair.Ratio(b, perRound, "calls",
						benchpair.Variant{Name: tt.base.name, Round: tt.base.run(b, perRound)},
						benchpair.Variant{Name: tt.other.name, Round: tt.other.run(b, perRound)})
					if tt.extra != "" {
						b.ReportMetric(float64(tt.other.mean()-tt.base.mean()), tt.extra)
					}
				})
			}
		})
	}
}

// timed is one benchmark variant: round is one call; it keeps the total
// time and count of the calls it made.
type timed struct {
	name  string
	round func() error
	total time.Duration
	calls int
}

func (v *timed) run(b *testing.B, n int) func() time.Duration {
	return func() time.Duration {
		start := time.Now()
		for range n {
			if err := v.round(); err != nil {
				b.Fatal(err)
			}
		}
		d := time.Since(start)
		v.total += d
		v.calls += n
		return d
	}
}

func (v *timed) mean() time.Duration { return v.total / time.Duration(v.calls) }

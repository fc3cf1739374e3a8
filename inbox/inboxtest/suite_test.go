package inboxtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// The suite is tested the way a conformance suite must be: it passes an
// intact store and fails each store broken one way, in the case meant for
// the defect, stating that case's rule.

// defect is one way a store wrapping memstore is broken.
type defect string

const (
	intact          defect = ""
	replaysNothing  defect = "replays-nothing"  // every record looks expired, to Begin and Commit alike
	rollbackCommits defect = "rollback-commits" // Rollback commits the effect (with a record that is already expired)
	neverExpires    defect = "never-expires"    // records are live for ever
	sweepsLive      defect = "sweeps-live"      // DeleteExpired deletes live records too
	farFuture              = 100 * 365 * 24 * time.Hour
)

type brokenStore struct {
	*memstore.Store
	defect defect
}

func (s *brokenStore) shift(now time.Time) time.Time {
	switch s.defect {
	case replaysNothing:
		return now.Add(farFuture)
	case neverExpires:
		return now.Add(-farFuture)
	}
	return now
}

func (s *brokenStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	q := *p
	q.Now = s.shift(p.Now)
	rec, tx, err := s.Store.Begin(ctx, &q)
	if tx != nil {
		tx = &brokenTx{Tx: tx, store: s, scope: p.Scope, key: p.Key}
	}
	return rec, tx, err
}

func (s *brokenStore) DeleteExpired(ctx context.Context, p *idem.DeleteExpiredParams) (int, error) {
	q := *p
	if s.defect == sweepsLive {
		q.Now = p.Now.Add(farFuture)
	}
	return s.Store.DeleteExpired(ctx, &q)
}

type brokenTx struct {
	idem.Tx
	store      *brokenStore
	scope, key string
}

func (t *brokenTx) Commit(ctx context.Context, p *idem.CommitParams) error {
	q := *p
	q.Now = t.store.shift(p.Now)
	return t.Tx.Commit(ctx, &q)
}

func (t *brokenTx) Rollback(ctx context.Context) error {
	if t.store.defect == rollbackCommits {
		expired := &idem.Record{Scope: t.scope, Key: t.key, State: idem.StateCompleted}
		return t.Tx.Commit(ctx, &idem.CommitParams{Record: expired, Now: time.Now()})
	}
	return t.Tx.Rollback(ctx)
}

func brokenHarness(d defect) Harness {
	return Harness{
		NewLocation: func(testing.TB) string { return "" },
		Open: func(context.Context, string) (idem.Store, error) {
			return &brokenStore{Store: memstore.New(), defect: d}, nil
		},
		Effect: func(ctx context.Context, name string) error {
			tx, ok := memstore.TxFrom(ctx)
			if !ok {
				return errors.New("no memstore transaction in the context")
			}
			n, _ := tx.Get(name)
			tx.Set(name, n+"x")
			return nil
		},
		CountEffects: func(_ context.Context, s idem.Store, name string) (int, error) {
			v, _ := s.(*brokenStore).Value(name)
			return len(v), nil
		},
	}
}

// TestSuiteIsWellFormed checks that every case has its own name, a run
// and a rule.
func TestSuiteIsWellFormed(t *testing.T) {
	t.Parallel()
	suite.WellFormed(t)
}

func TestSuitePassesAnIntactStore(t *testing.T) {
	t.Parallel()
	for name, r := range suite.Record(t, new(brokenHarness(intact)), nil) {
		if r.Failed || r.Skipped {
			t.Errorf("case %s failed=%v skipped=%v on an intact store:\n%s", name, r.Failed, r.Skipped, r.Log)
		}
	}
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		defect   defect
		caughtBy []string
	}{
		{replaysNothing, []string{"DuplicateRunsNothingAndIsAcked", "RefusalIsSettledAndCommitsNothing"}},
		{rollbackCommits, []string{"HandlerErrorRollsBackThenSucceeds", "PanicRollsBackAndIsRetried", "RefusalIsSettledAndCommitsNothing", "PersistentFailureIsDeadLetteredAtMaxAttempts"}},
		{neverExpires, []string{"IDIsRememberedForSevenDaysByDefault", "ConfiguredTTLSetsExpiry"}},
		{sweepsLive, []string{"SweeperDeletesExpiredInboxRecords"}},
	} {
		t.Run(string(tt.defect), func(t *testing.T) {
			t.Parallel()
			out := suite.Record(t, new(brokenHarness(tt.defect)), nil)
			suite.Caught(t, out, string(tt.defect), tt.caughtBy)
		})
	}
}

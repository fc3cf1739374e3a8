package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/memstore"
)

// mutation names one way to break memstore's leased store: each is a
// defect found in, or plausible for, a real store. The zero value breaks
// nothing.
type mutation string

const (
	intact mutation = ""

	// SaveStep writes whatever the token: no fencing.
	saveStepNotFenced mutation = "SaveStepNotFenced"
	// Complete writes whatever the token.
	completeNotFenced mutation = "CompleteNotFenced"
	// Heartbeat extends the lease whatever the token.
	heartbeatNotFenced mutation = "HeartbeatNotFenced"
	// A takeover keeps the token it took over: the previous holder's
	// writes still apply.
	takeoverWithoutTokenBump mutation = "TakeoverWithoutTokenBump"
	// Claim takes a pending record over under a live lease.
	claimIgnoresLiveLease mutation = "ClaimIgnoresALiveLease"
	// Abandoned returns every pending record, live leases included.
	abandonedReturnsLiveLeases mutation = "AbandonedReturnsLiveLeases"
	// Claim returns the steps sorted by name, not in the order saved.
	stepsSortedByName mutation = "StepsSortedByName"
	// Release leaves the lease as it was and drops the error.
	releaseKeepsTheLease mutation = "ReleaseKeepsTheLease"
	// Claim keeps no TTL: a store without the column.
	claimDropsTheTTL mutation = "ClaimDropsTheTTL"
	// A takeover answers the taker's TTL, not the record's: an upsert
	// that sets the TTL whether it inserts or takes over.
	takeoverTakesItsOwnTTL mutation = "TakeoverTakesItsOwnTTL"
	// A refused write's error quotes the scope and key.
	fencedErrorQuotesTheKey mutation = "FencedErrorQuotesTheKey"
)

// TestSuiteCatchesBrokenStores runs the suite against memstore broken one
// way each, and checks that the cases meant for each defect fail.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mutation mutation
		caughtBy []string
	}{
		{saveStepNotFenced, []string{"StaleHolderWritesNothing", "WritesOnACompletedRecordAreRefused", "EngineFencesAStaleHolder"}},
		{completeNotFenced, []string{"StaleHolderWritesNothing"}}, // the engine stops at the refused step, before Complete
		{heartbeatNotFenced, []string{"StaleHolderWritesNothing", "EngineHeartbeatStopsAFencedHolder"}},
		{takeoverWithoutTokenBump, []string{"EndedLeaseIsTakenOverWithAGreaterToken", "StaleHolderWritesNothing", "EngineFencesAStaleHolder"}},
		{claimIgnoresLiveLease, []string{"LiveLeaseIsNotClaimable", "ConcurrentClaimsOfANewKeyClaimOnce", "EngineAnswersInFlightDuringALiveLease", "EngineRunsConcurrentCallsOnce", "HeartbeatExtendsTheLease"}},
		{abandonedReturnsLiveLeases, []string{"AbandonedListsEndedLeasesLongestEndedFirst", "CompleterFinishesAbandonedWork"}},
		{stepsSortedByName, []string{"EndedLeaseIsTakenOverWithAGreaterToken"}},
		{releaseKeepsTheLease, []string{"ReleaseEndsTheLeaseAndKeepsSteps", "EngineResumesAfterAFailedAttempt"}},
		{claimDropsTheTTL, []string{"NewClaimIsPendingWithALease", "ExpiredCompletedRecordIsReplaced", "ClaimKeepsTheCallsTTL", "CompleterCompletesWithTheCallsTTL"}},
		{fencedErrorQuotesTheKey, []string{"FencedErrorsNameNoScopeOrKey"}},
		{takeoverTakesItsOwnTTL, []string{"EndedLeaseIsTakenOverWithAGreaterToken", "ClaimKeepsTheCallsTTL", "CompleterCompletesWithTheCallsTTL"}},
	} {
		t.Run(string(tt.mutation), func(t *testing.T) {
			t.Parallel()
			out := suite.Record(t, new(mutantHarness(tt.mutation)), nil)
			suite.Caught(t, out, string(tt.mutation), tt.caughtBy)
		})
	}
}

// TestSuitePassesIntactStores runs the suite against memstore through the
// wrapper that the mutants use, with nothing broken (TestFileStoreConformance
// runs it on a persistent store).
func TestSuitePassesIntactStores(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]Harness{"Memstore": mutantHarness(intact)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for case_, o := range suite.Record(t, &h, nil) {
				if o.Failed {
					t.Errorf("%s failed:\n%s", case_, o.Log)
				}
			}
		})
	}
}

// TestSuiteIsWellFormed checks that every case has its own name, a run,
// and a rule that cites a leased-mode rule of docs/DESIGN.md.
func TestSuiteIsWellFormed(t *testing.T) {
	t.Parallel()
	suite.WellFormed(t, "docs/DESIGN.md L")
}

// mutant is a memstore broken by one mutation. The unfenced writes find
// the current token of the key (the mutant sees every claim) and write
// with it, as a store that does not check the token would.
type mutant struct {
	*memstore.Store
	mut mutation

	mu sync.Mutex
	// current is the token of the latest claim of each key; first is the
	// token of the first claim of the record, which a takeover without a
	// bump hands out again.
	current map[[2]string]int64
	first   map[[2]string]int64
}

func newMutant(m mutation) *mutant {
	return &mutant{Store: memstore.New(), mut: m, current: map[[2]string]int64{}, first: map[[2]string]int64{}}
}

func (s *mutant) Claim(ctx context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	if s.mut == claimDropsTheTTL {
		q := *p
		q.TTL = 0
		p = &q
	}
	c, err := s.Store.Claim(ctx, p)
	if err != nil {
		return nil, err
	}
	rec := c.Record
	if !c.Claimed && s.mut == claimIgnoresLiveLease && rec.State == idem.StatePending &&
		rec.Fingerprint == p.Fingerprint && p.Now.Before(rec.LeaseUntil) {
		q := *p
		q.Now = rec.LeaseUntil
		if c, err = s.Store.Claim(ctx, &q); err != nil {
			return nil, err
		}
	}
	if !c.Claimed {
		return c, nil
	}
	k := [2]string{p.Scope, p.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current[k] = c.Lease.Token
	if c.Record.Attempts == 1 {
		s.first[k] = c.Lease.Token
	} else if s.mut == takeoverWithoutTokenBump {
		c.Lease.Token, c.Record.Token = s.first[k], s.first[k]
	} else if s.mut == takeoverTakesItsOwnTTL {
		c.Record.TTL = p.TTL
	}
	if s.mut == stepsSortedByName {
		slices.SortFunc(c.Steps, func(a, b idem.Step) int { return strings.Compare(a.Name, b.Name) })
	}
	return c, nil
}

// lease returns the lease a write of a mutant applies with: the current
// one when the write is not fenced, or when the takeover handed out the
// first token again.
func (s *mutant) lease(l idem.Lease, unfenced bool) idem.Lease {
	k := [2]string{l.Scope, l.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if unfenced || (s.mut == takeoverWithoutTokenBump && l.Token == s.first[k]) {
		if cur, ok := s.current[k]; ok {
			l.Token = cur
		}
	}
	return l
}

// quote adds l's scope and key to a fenced error, as a store that names the
// record in its errors would.
func (s *mutant) quote(l idem.Lease, err error) error {
	if s.mut == fencedErrorQuotesTheKey && errors.Is(err, idem.ErrFenced) {
		return fmt.Errorf("(%q, %q): %w", l.Scope, l.Key, err)
	}
	return err
}

func (s *mutant) Heartbeat(ctx context.Context, p *idem.HeartbeatParams) error {
	q := *p
	q.Lease = s.lease(p.Lease, s.mut == heartbeatNotFenced)
	return s.quote(p.Lease, s.Store.Heartbeat(ctx, &q))
}

func (s *mutant) SaveStep(ctx context.Context, p *idem.SaveStepParams) error {
	q := *p
	q.Lease = s.lease(p.Lease, s.mut == saveStepNotFenced)
	err := s.Store.SaveStep(ctx, &q)
	if s.mut == saveStepNotFenced && errors.Is(err, idem.ErrFenced) {
		// An upsert into a steps table that never looks at the record:
		// it "succeeds" on a completed record too.
		return nil
	}
	return err
}

func (s *mutant) Complete(ctx context.Context, p *idem.CompleteParams) error {
	q := *p
	q.Lease = s.lease(p.Lease, s.mut == completeNotFenced)
	return s.Store.Complete(ctx, &q)
}

func (s *mutant) Release(ctx context.Context, p *idem.ReleaseParams) error {
	if s.mut == releaseKeepsTheLease {
		return nil
	}
	q := *p
	q.Lease = s.lease(p.Lease, false)
	return s.Store.Release(ctx, &q)
}

func (s *mutant) Abandoned(ctx context.Context, p *idem.AbandonedParams) ([]*idem.Record, error) {
	q := *p
	if s.mut == abandonedReturnsLiveLeases {
		q.Now = idem.PendingExpiresAt
	}
	return s.Store.Abandoned(ctx, &q)
}

func (s *mutant) BeginStep(ctx context.Context, p *idem.BeginStepParams) (idem.StepTx, error) {
	q := *p
	q.Lease = s.lease(p.Lease, false)
	return s.Store.BeginStep(ctx, &q)
}

// mutantHarness drives a mutant with mutation m.
func mutantHarness(m mutation) Harness {
	return Harness{
		NewLocation: func(testing.TB) string { return "" },
		Open: func(context.Context, string) (idem.LeasedStore, error) {
			return newMutant(m), nil
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
		CountEffects: func(_ context.Context, s idem.LeasedStore, name string) (int, error) {
			v, _ := s.(*mutant).Value(name)
			return len(v), nil
		},
	}
}

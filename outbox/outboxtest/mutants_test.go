package outboxtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/memstore"
	"github.com/idemkit/idem/outbox"
)

// mutation is one defect of the reference outbox.
type mutation string

const (
	intact              mutation = ""
	publishBeforeCommit mutation = "PublishBeforeCommit" // staged rows are visible (and kept) at once
	publishRolledBack   mutation = "PublishRolledBack"   // a rollback keeps the staged rows
	marksBeforeConfirm  mutation = "MarksBeforeConfirm"  // a claim marks its rows sent when it takes them
	losesRowOnCrash     mutation = "LosesRowOnCrash"     // an unfinished claim deletes its rows
	stagesTwice         mutation = "StagesTwice"         // no unique id: a re-execution stages again
	parkDrops           mutation = "ParkDrops"           // a parked message is deleted
)

// TestSuiteCatchesBrokenOutboxes runs the suite against copies of the
// reference outbox broken one way each, and checks that the cases meant
// for each defect fail.
func TestSuiteCatchesBrokenOutboxes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mutation mutation
		caughtBy []string
	}{
		{publishBeforeCommit, []string{"UncommittedMessageIsNotPublished", "RolledBackMessageIsNeverPublished"}},
		{publishRolledBack, []string{"RolledBackMessageIsNeverPublished"}},
		{marksBeforeConfirm, []string{"MarkedSentOnlyAfterConfirm", "RelayDyingMidClaimLosesNothing"}},
		{losesRowOnCrash, []string{"RelayDyingMidClaimLosesNothing"}},
		{stagesTwice, []string{"ReExecutionStagesTheSameIDOnce"}},
		{parkDrops, []string{"RefusedMessageIsParkedNeverDropped"}},
	} {
		t.Run(string(tt.mutation), func(t *testing.T) {
			t.Parallel()
			out := suite.Record(t, refHarness(tt.mutation), &conformanceTimeout)
			suite.Caught(t, out, string(tt.mutation), tt.caughtBy)
		})
	}
}

// TestSuitePassesTheReferenceOutbox runs the suite against the intact
// reference outbox.
func TestSuitePassesTheReferenceOutbox(t *testing.T) {
	t.Parallel()
	out := suite.Record(t, refHarness(intact), &conformanceTimeout)
	for name, o := range out {
		if o.Failed {
			t.Errorf("%s failed:\n%s", name, o.Log)
		}
	}
}

func TestSuiteIsWellFormed(t *testing.T) {
	suite.WellFormed(t, "docs/OUTBOX.md")
}

func refHarness(m mutation) *Harness {
	return &Harness{Open: func(t testing.TB) (idem.Store, outbox.Source) {
		o := &refOutbox{m: m}
		return &refStore{inner: memstore.New(), o: o}, o
	}}
}

// refStore is memstore with an outbox kept in memory: the reference the
// suite is checked against.
type refStore struct {
	inner idem.Store
	o     *refOutbox
}

func (s *refStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	rec, tx, err := s.inner.Begin(ctx, p)
	if tx == nil {
		return rec, nil, err
	}
	return rec, &refTx{inner: tx, o: s.o, scope: p.Scope, key: p.Key}, err
}

type refTx struct {
	inner      idem.Tx
	o          *refOutbox
	scope, key string
	staged     []outbox.Staged
}

func (t *refTx) Handle() any                       { return t.inner.Handle() }
func (t *refTx) OutboxIntent() (scope, key string) { return t.scope, t.key }

func (t *refTx) StageOutbox(_ context.Context, msgs []outbox.Staged) error {
	if t.o.m == publishBeforeCommit {
		t.o.add(msgs)
		return nil
	}
	t.staged = append(t.staged, msgs...)
	return nil
}

func (t *refTx) Commit(ctx context.Context, p *idem.CommitParams) error {
	t.o.mu.Lock() // the record and the rows become visible together
	defer t.o.mu.Unlock()
	if err := t.inner.Commit(ctx, p); err != nil {
		return err
	}
	t.o.addLocked(t.staged)
	t.staged = nil
	return nil
}

func (t *refTx) Rollback(ctx context.Context) error {
	if t.o.m == publishRolledBack {
		t.o.add(t.staged)
	}
	t.staged = nil
	return t.inner.Rollback(ctx)
}

type refRow struct {
	seq      int64
	e        outbox.Envelope
	stagedAt time.Time
	sentAt   time.Time
	parked   *outbox.ParkedMessage
	claimed  bool
}

type refOutbox struct {
	m    mutation
	mu   sync.Mutex
	seq  int64
	rows []*refRow
}

func (o *refOutbox) add(msgs []outbox.Staged) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.addLocked(msgs)
}

func (o *refOutbox) addLocked(msgs []outbox.Staged) {
	for _, m := range msgs {
		if o.m != stagesTwice && slices.ContainsFunc(o.rows, func(r *refRow) bool { return r.e.ID == m.ID }) {
			continue
		}
		o.seq++
		o.rows = append(o.rows, &refRow{seq: o.seq, stagedAt: time.Now(), e: outbox.Envelope{
			ID: m.ID, Subject: m.Subject, Body: m.Body, Headers: m.Headers, PartitionKey: m.PartitionKey, Attempt: 1,
		}})
	}
}

func (r *refRow) pending() bool { return r.sentAt.IsZero() && r.parked == nil }

func (o *refOutbox) Claim(_ context.Context, n int) (outbox.Claim, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	busy := map[string]bool{}
	for _, r := range o.rows {
		if r.claimed && r.e.PartitionKey != "" {
			busy[r.e.PartitionKey] = true
		}
	}
	c := &refClaim{o: o}
	for _, r := range o.rows {
		if len(c.rows) == n {
			break
		}
		if !r.pending() || r.claimed || busy[r.e.PartitionKey] {
			continue
		}
		r.claimed = true
		if o.m == marksBeforeConfirm {
			r.sentAt = time.Now()
		}
		c.rows = append(c.rows, r)
	}
	return c, nil
}

type refClaim struct {
	o     *refOutbox
	rows  []*refRow
	ended bool
}

func (c *refClaim) Messages() []outbox.Envelope {
	out := make([]outbox.Envelope, len(c.rows))
	for i, r := range c.rows {
		out[i] = r.e
	}
	return out
}

func (c *refClaim) Finish(_ context.Context, o *outbox.Outcome) ([]string, error) {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	var parked []string
	for _, r := range c.rows {
		switch {
		case slices.Contains(o.Sent, r.e.ID):
			r.sentAt = o.Now
		case slices.ContainsFunc(o.Failed, func(f outbox.Failure) bool { return f.ID == r.e.ID }):
			i := slices.IndexFunc(o.Failed, func(f outbox.Failure) bool { return f.ID == r.e.ID })
			r.e.Attempt++
			if r.e.Attempt > o.MaxAttempts {
				r.parked = &outbox.ParkedMessage{Envelope: r.e, StagedAt: r.stagedAt, ParkedAt: o.Now, LastError: o.Failed[i].Error}
				parked = append(parked, r.e.ID)
			}
		}
		r.claimed = false
	}
	if c.o.m == parkDrops {
		c.o.rows = slices.DeleteFunc(c.o.rows, func(r *refRow) bool { return r.parked != nil })
	}
	c.ended = true
	return parked, nil
}

func (c *refClaim) Abort(context.Context) error {
	c.o.mu.Lock()
	defer c.o.mu.Unlock()
	if c.ended {
		return nil
	}
	c.ended = true
	for _, r := range c.rows {
		r.claimed = false
	}
	if c.o.m == losesRowOnCrash {
		c.o.rows = slices.DeleteFunc(c.o.rows, func(r *refRow) bool { return slices.Contains(c.rows, r) })
	}
	return nil
}

func (o *refOutbox) Backlog(context.Context) (outbox.Backlog, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b outbox.Backlog
	for _, r := range o.rows {
		switch {
		case r.parked != nil:
			b.Parked++
		case r.pending():
			b.Pending++
			if b.OldestPending.IsZero() {
				b.OldestPending = r.stagedAt
			}
		}
	}
	return b, nil
}

func (o *refOutbox) Sweep(_ context.Context, before time.Time, limit int) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	o.rows = slices.DeleteFunc(o.rows, func(r *refRow) bool {
		if n < limit && !r.sentAt.IsZero() && r.sentAt.Before(before) {
			n++
			return true
		}
		return false
	})
	return n, nil
}

func (o *refOutbox) Parked(_ context.Context, limit int) ([]outbox.ParkedMessage, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []outbox.ParkedMessage
	for _, r := range o.rows {
		if r.parked != nil && len(out) < limit {
			out = append(out, *r.parked)
		}
	}
	return out, nil
}

func (o *refOutbox) Unpark(_ context.Context, id string) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.rows {
		if r.e.ID == id && r.parked != nil {
			r.parked, r.e.Attempt = nil, 1
			return true, nil
		}
	}
	return false, nil
}

var conformanceTimeout = conformance.RecordConfig{Timeout: time.Minute, Parallel: true}

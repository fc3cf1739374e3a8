package memstore

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/idemkit/idem"
)

var (
	_ idem.LeasedStore   = (*Store)(nil)
	_ idem.LeasedTxStore = (*Store)(nil)
)

// Claim implements idem.LeasedStore. A claim that finds a local step of the
// key's holder in progress returns the record unclaimed.
func (s *Store) Claim(ctx context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Lease <= 0 {
		return nil, fmt.Errorf("memstore: Claim: lease must be positive, got %s", p.Lease)
	}
	k := recordKey{p.Scope, p.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.records[k]
	switch {
	case !exists || old.Expired(p.Now): // a pending record never expires
		token := p.Now.UnixMicro()
		if exists && old.Token >= token {
			token = old.Token + 1
		}
		rec := idem.Record{
			Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint,
			State: idem.StatePending, CreatedAt: p.Now, ExpiresAt: idem.PendingExpiresAt,
			Token: token, LeaseUntil: p.Now.Add(p.Lease),
			Kind: p.Kind, Input: slices.Clone(p.Input), TTL: p.TTL, Attempts: 1,
		}
		s.records[k] = rec
		delete(s.steps, k)
		return &idem.Claim{Record: clone(rec), Claimed: true, Lease: leaseOf(rec)}, nil
	case old.State == idem.StatePending && p.Now.Compare(old.LeaseUntil) >= 0 &&
		old.Fingerprint == p.Fingerprint && !s.locks[k]:
		old.Token++
		old.Attempts++
		old.LeaseUntil = p.Now.Add(p.Lease)
		s.records[k] = old
		steps := make([]idem.Step, len(s.steps[k]))
		for i, st := range s.steps[k] {
			steps[i] = idem.Step{Name: st.Name, Output: slices.Clone(st.Output)}
		}
		return &idem.Claim{Record: clone(old), Claimed: true, Lease: leaseOf(old), Steps: steps}, nil
	default:
		return &idem.Claim{Record: clone(old)}, nil
	}
}

func leaseOf(r idem.Record) idem.Lease {
	return idem.Lease{Scope: r.Scope, Key: r.Key, Token: r.Token}
}

// fenced returns the record l holds, or ErrFenced. s.mu must be held.
func (s *Store) fenced(l idem.Lease) (idem.Record, error) {
	rec, ok := s.records[recordKey{l.Scope, l.Key}]
	if !ok || rec.State != idem.StatePending || rec.Token != l.Token {
		return idem.Record{}, idem.ErrFenced
	}
	return rec, nil
}

// Heartbeat implements idem.LeasedStore.
func (s *Store) Heartbeat(ctx context.Context, p *idem.HeartbeatParams) error {
	return s.leasedWrite(ctx, p.Lease, func(rec *idem.Record) {
		rec.LeaseUntil = p.Now.Add(p.Duration)
	})
}

// SaveStep implements idem.LeasedStore.
func (s *Store) SaveStep(ctx context.Context, p *idem.SaveStepParams) error {
	return s.leasedWrite(ctx, p.Lease, func(*idem.Record) {
		s.saveStep(recordKey{p.Lease.Scope, p.Lease.Key}, p.Name, p.Output)
	})
}

// saveStep records a step; s.mu must be held.
func (s *Store) saveStep(k recordKey, name string, output []byte) {
	steps := s.steps[k]
	for i := range steps {
		if steps[i].Name == name {
			steps[i].Output = slices.Clone(output)
			return
		}
	}
	s.steps[k] = append(steps, idem.Step{Name: name, Output: slices.Clone(output)})
}

// Complete implements idem.LeasedStore.
func (s *Store) Complete(ctx context.Context, p *idem.CompleteParams) error {
	return s.leasedWrite(ctx, p.Lease, func(rec *idem.Record) {
		rec.State = idem.StateCompleted
		rec.Result = clone(idem.Record{Result: p.Result}).Result
		rec.ExpiresAt = p.ExpiresAt
		rec.LastError = ""
		delete(s.steps, recordKey{p.Lease.Scope, p.Lease.Key})
	})
}

// Release implements idem.LeasedStore.
func (s *Store) Release(ctx context.Context, p *idem.ReleaseParams) error {
	return s.leasedWrite(ctx, p.Lease, func(rec *idem.Record) {
		rec.LeaseUntil = p.RetryAt
		rec.LastError = p.Error
	})
}

func (s *Store) leasedWrite(ctx context.Context, l idem.Lease, write func(*idem.Record)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.fenced(l)
	if err != nil {
		return err
	}
	write(&rec)
	s.records[recordKey{l.Scope, l.Key}] = rec
	return nil
}

// Abandoned implements idem.LeasedStore.
func (s *Store) Abandoned(ctx context.Context, p *idem.AbandonedParams) ([]*idem.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*idem.Record
	for _, rec := range s.records {
		if rec.State == idem.StatePending && p.Now.Compare(rec.LeaseUntil) >= 0 {
			out = append(out, clone(rec))
		}
	}
	slices.SortFunc(out, func(a, b *idem.Record) int { return a.LeaseUntil.Compare(b.LeaseUntil) })
	if len(out) > p.Limit {
		out = out[:max(p.Limit, 0)]
	}
	return out, nil
}

// BeginStep implements idem.LeasedTxStore. The step's Handle is a *Tx, so
// TxFrom works in a local step as in atomic work.
func (s *Store) BeginStep(ctx context.Context, p *idem.BeginStepParams) (idem.StepTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := recordKey{p.Lease.Scope, p.Lease.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.fenced(p.Lease); err != nil {
		return nil, err
	}
	if s.locks[k] {
		return nil, fmt.Errorf("memstore: BeginStep: a step of key_sha256 %s is already open", idem.KeyHash(p.Lease.Key))
	}
	s.locks[k] = true
	return &stepTx{Tx: &Tx{store: s, key: k, staged: make(map[string]string)}, lease: p.Lease, name: p.Name}, nil
}

type stepTx struct {
	*Tx
	lease idem.Lease
	name  string
}

func (st *stepTx) Commit(ctx context.Context, output []byte) error {
	s := st.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.ended {
		return fmt.Errorf("memstore: step %q already ended", st.name)
	}
	st.ended = true
	delete(s.locks, st.key)
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.fenced(st.lease); err != nil {
		return err
	}
	maps.Copy(s.values, st.staged)
	s.saveStep(st.key, st.name, output)
	return nil
}

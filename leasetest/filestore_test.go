package leasetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/idemkit/idem"
)

// TestFileStoreConformance runs the suite, its persistent cases included,
// against fileStore: a leased store kept in a JSON file, so that a record
// outlives its process (the crash case kills a child that holds a key).
func TestFileStoreConformance(t *testing.T) {
	Run(t, fileHarness(false))
}

// TestSuiteCatchesAStoreThatForgets runs the suite against a fileStore
// that loses its file whenever it is opened: the persistent cases must
// fail.
func TestSuiteCatchesAStoreThatForgets(t *testing.T) {
	t.Parallel()
	out := suite.Record(t, new(fileHarness(true)), nil)
	caughtBy := []string{"PendingRecordAndStepsSurviveReopen", "KilledHolderIsTakenOverFromItsLastStep"}
	suite.Caught(t, out, "ForgetsOnOpen", caughtBy)
}

// fileHarness drives a fileStore; with forget, Open deletes its file.
func fileHarness(forget bool) Harness {
	return Harness{
		NewLocation: func(t testing.TB) string { return filepath.Join(t.TempDir(), "leased.json") },
		Open: func(_ context.Context, location string) (idem.LeasedStore, error) {
			if forget {
				if err := os.Remove(location); err != nil && !errors.Is(err, os.ErrNotExist) {
					return nil, err
				}
			}
			return &fileStore{path: location, locks: map[string]bool{}}, nil
		},
		Persistent: true,
		Effect: func(ctx context.Context, name string) error {
			tx, ok := idem.TxFrom(ctx)
			if !ok {
				return errors.New("no transaction in the context")
			}
			st, ok := tx.Handle().(*fileStep)
			if !ok {
				return fmt.Errorf("the context's transaction is a %T, not a fileStore step", tx.Handle())
			}
			st.effects = append(st.effects, name)
			return nil
		},
		CountEffects: func(_ context.Context, s idem.LeasedStore, name string) (int, error) {
			fs := s.(*fileStore)
			fs.mu.Lock()
			defer fs.mu.Unlock()
			st, err := fs.load()
			return st.Effects[name], err
		},
	}
}

// fileState is everything a fileStore keeps, written whole at each write
// (to a temporary file, then renamed), so that each write is atomic.
type fileState struct {
	Records map[string]idem.Record
	Steps   map[string][]idem.Step
	Effects map[string]int
}

// fileStore is the leased contract as memstore keeps it, in a file. One
// process uses a file at a time; locks of open steps are the process's.
type fileStore struct {
	path  string
	mu    sync.Mutex
	locks map[string]bool
}

var _ idem.LeasedTxStore = (*fileStore)(nil)

func fileKey(scope, key string) string { return scope + "\x00" + key }

func (s *fileStore) load() (*fileState, error) {
	st := &fileState{Records: map[string]idem.Record{}, Steps: map[string][]idem.Step{}, Effects: map[string]int{}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	return st, json.Unmarshal(b, st)
}

func (s *fileStore) save(st *fileState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// update runs f on the state under the mutex and saves it if f succeeds.
func (s *fileStore) update(f func(st *fileState) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return err
	}
	if err := f(st); err != nil {
		return err
	}
	return s.save(st)
}

func (s *fileStore) Claim(_ context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	var c *idem.Claim
	err := s.update(func(st *fileState) error {
		k := fileKey(p.Scope, p.Key)
		old, exists := st.Records[k]
		switch {
		case !exists || (old.State != idem.StatePending && old.Expired(p.Now)):
			rec := idem.Record{
				Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint, State: idem.StatePending,
				CreatedAt: p.Now, ExpiresAt: idem.PendingExpiresAt, Token: max(p.Now.UnixMicro(), old.Token+1),
				LeaseUntil: p.Now.Add(p.Lease), Kind: p.Kind, Input: slices.Clone(p.Input), TTL: p.TTL, Attempts: 1,
			}
			st.Records[k] = rec
			delete(st.Steps, k)
			c = &idem.Claim{Record: &rec, Claimed: true, Lease: idem.Lease{Scope: p.Scope, Key: p.Key, Token: rec.Token}}
		case old.State == idem.StatePending && !p.Now.Before(old.LeaseUntil) && old.Fingerprint == p.Fingerprint && !s.locks[k]:
			old.Token++
			old.Attempts++
			old.LeaseUntil = p.Now.Add(p.Lease)
			st.Records[k] = old
			c = &idem.Claim{Record: &old, Claimed: true, Lease: idem.Lease{Scope: p.Scope, Key: p.Key, Token: old.Token}, Steps: st.Steps[k]}
		default:
			c = &idem.Claim{Record: &old}
		}
		return nil
	})
	return c, err
}

// fencedUpdate applies write to the record l holds, or fails with
// ErrFenced.
func (s *fileStore) fencedUpdate(l idem.Lease, write func(st *fileState, rec *idem.Record)) error {
	return s.update(func(st *fileState) error {
		k := fileKey(l.Scope, l.Key)
		rec, ok := st.Records[k]
		if !ok || rec.State != idem.StatePending || rec.Token != l.Token {
			return idem.ErrFenced
		}
		write(st, &rec)
		st.Records[k] = rec
		return nil
	})
}

func saveFileStep(st *fileState, k, name string, output []byte) {
	for i, s := range st.Steps[k] {
		if s.Name == name {
			st.Steps[k][i].Output = output
			return
		}
	}
	st.Steps[k] = append(st.Steps[k], idem.Step{Name: name, Output: output})
}

func (s *fileStore) Heartbeat(_ context.Context, p *idem.HeartbeatParams) error {
	return s.fencedUpdate(p.Lease, func(_ *fileState, rec *idem.Record) { rec.LeaseUntil = p.Now.Add(p.Duration) })
}

func (s *fileStore) SaveStep(_ context.Context, p *idem.SaveStepParams) error {
	return s.fencedUpdate(p.Lease, func(st *fileState, _ *idem.Record) {
		saveFileStep(st, fileKey(p.Lease.Scope, p.Lease.Key), p.Name, p.Output)
	})
}

func (s *fileStore) Complete(_ context.Context, p *idem.CompleteParams) error {
	return s.fencedUpdate(p.Lease, func(st *fileState, rec *idem.Record) {
		rec.State, rec.Result, rec.ExpiresAt, rec.LastError = idem.StateCompleted, p.Result, p.ExpiresAt, ""
		delete(st.Steps, fileKey(p.Lease.Scope, p.Lease.Key))
	})
}

func (s *fileStore) Release(_ context.Context, p *idem.ReleaseParams) error {
	return s.fencedUpdate(p.Lease, func(_ *fileState, rec *idem.Record) { rec.LeaseUntil, rec.LastError = p.RetryAt, p.Error })
}

func (s *fileStore) Abandoned(_ context.Context, p *idem.AbandonedParams) ([]*idem.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return nil, err
	}
	var out []*idem.Record
	for _, rec := range st.Records {
		if rec.State == idem.StatePending && !p.Now.Before(rec.LeaseUntil) {
			out = append(out, &rec)
		}
	}
	slices.SortFunc(out, func(a, b *idem.Record) int { return a.LeaseUntil.Compare(b.LeaseUntil) })
	return out[:min(len(out), max(p.Limit, 0))], nil
}

// DeleteExpired implements idem.ExpiredDeleter.
func (s *fileStore) DeleteExpired(_ context.Context, p *idem.DeleteExpiredParams) (int, error) {
	n := 0
	err := s.update(func(st *fileState) error {
		for _, k := range slices.Sorted(maps.Keys(st.Records)) {
			if rec := st.Records[k]; n < p.Limit && rec.Expired(p.Now) {
				delete(st.Records, k)
				n++
			}
		}
		return nil
	})
	return n, err
}

// fileStep is an open local step: its effects are kept until Commit
// writes them with the step, in one write of the file.
type fileStep struct {
	s       *fileStore
	lease   idem.Lease
	name    string
	effects []string
	ended   bool
}

func (s *fileStore) BeginStep(_ context.Context, p *idem.BeginStepParams) (idem.StepTx, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return nil, err
	}
	k := fileKey(p.Lease.Scope, p.Lease.Key)
	rec, ok := st.Records[k]
	if !ok || rec.State != idem.StatePending || rec.Token != p.Lease.Token {
		return nil, idem.ErrFenced
	}
	if s.locks[k] {
		return nil, fmt.Errorf("fileStore: a step of %q is already open", p.Lease.Key)
	}
	s.locks[k] = true
	return &fileStep{s: s, lease: p.Lease, name: p.Name}, nil
}

func (t *fileStep) Handle() any { return t }

func (t *fileStep) Commit(_ context.Context, output []byte) error {
	if t.ended {
		return errors.New("fileStore: the step has ended")
	}
	t.ended = true
	k := fileKey(t.lease.Scope, t.lease.Key)
	return t.s.update(func(st *fileState) error {
		delete(t.s.locks, k)
		rec, ok := st.Records[k]
		if !ok || rec.State != idem.StatePending || rec.Token != t.lease.Token {
			return idem.ErrFenced
		}
		saveFileStep(st, k, t.name, output)
		for _, e := range t.effects {
			st.Effects[e]++
		}
		return nil
	})
}

func (t *fileStep) Rollback(context.Context) error {
	if !t.ended {
		t.ended = true
		t.unlock()
	}
	return nil
}

func (t *fileStep) unlock() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	delete(t.s.locks, fileKey(t.lease.Scope, t.lease.Key))
}

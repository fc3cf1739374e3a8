package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idem"
)

// mutation names one way to break the reference store: each is a defect
// found in, or plausible for, a real store. The zero value breaks nothing.
type mutation string

const (
	intact mutation = ""

	// The record is written in a transaction of its own, after the
	// effect's has committed (or before it): a failure in between leaves
	// one without the other.
	recordAfterEffect  mutation = "RecordAfterTheEffectsTransaction"
	recordBeforeEffect mutation = "RecordBeforeTheEffectsTransaction"
	// Commit is an upsert that overwrites a live record.
	upsertOverwritesLive mutation = "UpsertOverwritesALiveRecord"
	// Commit deletes the expired record Begin saw by its key alone, then
	// inserts: a live record that took its place meanwhile is deleted.
	deleteByKeyThenInsert mutation = "DeleteByKeyThenInsert"
	// Commit does not check that the transaction is still Begin's.
	noTxCheck mutation = "NoCheckThatTheTransactionIsBegins"
	// A caller refused by the lock is answered with the key's record,
	// even an expired one.
	refusedGetsExpired mutation = "RefusedCallerGetsTheExpiredRecord"
	// Begin never refuses: there is no lock.
	lockNeverRefuses mutation = "LockNeverRefuses"
	// Begin reads the record, then takes the lock without reading again.
	readBeforeLock mutation = "ReadBeforeTheLock"
	// Commit releases the lock before the record and effect are in.
	unlockBeforeCommit mutation = "UnlockBeforeCommit"
	// Rollback after Commit or Rollback returns an error.
	rollbackAfterEndFails mutation = "RollbackAfterTheEndFails"
	// Lookup of a missing record returns nil, nil.
	lookupMissingIsNil mutation = "LookupOfAMissingRecordIsNil"
	// Commit treats any existing record, expired or not, as live.
	expiredNeverReplaced mutation = "ExpiredRecordNeverReplaced"
	// Commit judges expiry at Begin's Now instead of its own.
	expiryJudgedAtBegin mutation = "ExpiryJudgedAtBegin"
	// Commit calls any failure of its transaction ErrConflict.
	failureIsConflict mutation = "CommitFailureCalledConflict"
	// DeleteExpired deletes every expired record, whatever its Limit.
	sweepIgnoresLimit mutation = "DeleteExpiredIgnoresItsLimit"
	// DeleteExpired deletes records that expire within the next minute.
	sweepDeletesLive mutation = "DeleteExpiredDeletesLiveRecords"
)

// window is how long a mutant that splits one critical section in two
// waits between the halves, as a database round trip would.
const window = 200 * time.Microsecond

var (
	errEnded   = errors.New("refstore: the transaction has already ended")
	errOutside = errors.New("refstore: the work ended the transaction itself")
	errDoomed  = errors.New("refstore: the transaction failed to commit")
)

type refKey struct{ scope, key string }

// refStore is the suite's reference store: memstore's design (a per-key
// try-lock, records and effects committed together under one mutex), plus
// what the Harness hooks need (a transaction a work can end, one that can
// fail to commit), with one optional mutation.
type refStore struct {
	mut     mutation
	mu      sync.Mutex
	records map[refKey]idem.Record
	locks   map[refKey]bool
	effects map[string]int
}

var (
	_ idem.Store          = (*refStore)(nil)
	_ idem.Inspector      = (*refStore)(nil)
	_ idem.ExpiredDeleter = (*refStore)(nil)
	_ idem.Tx             = (*refTx)(nil)
)

func newRefStore(m mutation) *refStore {
	return &refStore{mut: m, records: map[refKey]idem.Record{}, locks: map[refKey]bool{}, effects: map[string]int{}}
}

func (s *refStore) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	k := refKey{p.Scope, p.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, found := s.records[k]
	if s.mut == readBeforeLock {
		s.mu.Unlock()
		time.Sleep(window)
		s.mu.Lock()
	}
	if found && !rec.Expired(p.Now) {
		return refClone(rec), nil, nil
	}
	if s.locks[k] && s.mut != lockNeverRefuses {
		if found && s.mut == refusedGetsExpired {
			return refClone(rec), nil, nil
		}
		return nil, nil, idem.ErrInFlight
	}
	s.locks[k] = true
	return nil, &refTx{s: s, k: k, beginNow: p.Now, sawRecord: found, staged: map[string]int{}}, nil
}

func (s *refStore) Lookup(_ context.Context, p *idem.LookupParams) (*idem.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[refKey{p.Scope, p.Key}]
	switch {
	case ok:
		return refClone(rec), nil
	case s.mut == lookupMissingIsNil:
		return nil, nil
	}
	return nil, idem.ErrNotFound
}

func (s *refStore) DeleteExpired(_ context.Context, p *idem.DeleteExpiredParams) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	now := p.Now
	if s.mut == sweepDeletesLive {
		now = now.Add(time.Minute)
	}
	for k, rec := range s.records {
		if n == p.Limit && s.mut != sweepIgnoresLimit {
			break
		}
		if rec.Expired(now) {
			delete(s.records, k)
			n++
		}
	}
	return n, nil
}

func refClone(r idem.Record) *idem.Record {
	r.Result.Header = maps.Clone(r.Result.Header)
	for k, v := range r.Result.Header {
		r.Result.Header[k] = slices.Clone(v)
	}
	r.Result.Body = slices.Clone(r.Result.Body)
	return &r
}

// refTx is an open refStore transaction; it is its own handle.
type refTx struct {
	s         *refStore
	k         refKey
	beginNow  time.Time
	sawRecord bool // Begin found a record of the key (an expired one)
	staged    map[string]int
	ended     bool // Commit or Rollback has run
	outside   bool // the work ended Begin's transaction
	doomed    bool // the transaction will fail to commit
}

func (tx *refTx) Handle() any { return tx }

func (tx *refTx) Commit(_ context.Context, p *idem.CommitParams) error {
	s, m := tx.s, tx.s.mut
	s.mu.Lock()
	defer s.mu.Unlock()
	if tx.ended {
		return errEnded
	}
	tx.ended = true
	if m == unlockBeforeCommit {
		delete(s.locks, tx.k)
		s.mu.Unlock()
		time.Sleep(window)
		s.mu.Lock()
	} else {
		defer delete(s.locks, tx.k) // runs before the deferred Unlock
	}
	if tx.outside && m != noTxCheck {
		return errOutside
	}
	now := p.Now
	if m == expiryJudgedAtBegin {
		now = tx.beginNow
	}
	if m == deleteByKeyThenInsert && tx.sawRecord {
		delete(s.records, tx.k)
	}
	live := func() bool {
		old, ok := s.records[tx.k]
		return ok && (m == expiredNeverReplaced || !old.Expired(now))
	}
	switch m {
	case recordAfterEffect:
		if tx.doomed {
			return errDoomed
		}
		tx.apply()
		s.mu.Unlock() // the effect's transaction is over; the record's begins
		s.mu.Lock()
		if live() {
			return idem.ErrConflict
		}
		s.records[tx.k] = *refClone(*p.Record)
		return nil
	case recordBeforeEffect:
		if live() {
			return idem.ErrConflict
		}
		s.records[tx.k] = *refClone(*p.Record)
		s.mu.Unlock() // the record's transaction is over; the effect's commits
		s.mu.Lock()
		if tx.doomed {
			return errDoomed
		}
		tx.apply()
		return nil
	}
	if m != upsertOverwritesLive && live() {
		return idem.ErrConflict
	}
	if tx.doomed {
		if m == failureIsConflict {
			return idem.ErrConflict
		}
		return errDoomed
	}
	s.records[tx.k] = *refClone(*p.Record)
	tx.apply()
	return nil
}

// apply commits the staged effects; s.mu is held.
func (tx *refTx) apply() {
	for name, n := range tx.staged {
		tx.s.effects[name] += n
	}
	tx.staged = map[string]int{}
}

func (tx *refTx) Rollback(context.Context) error {
	s := tx.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if tx.ended {
		if s.mut == rollbackAfterEndFails {
			return errEnded
		}
		return nil
	}
	tx.ended = true
	delete(s.locks, tx.k)
	return nil
}

// endBehindTheStore is EndTx: the work commits or discards what it
// staged, and whatever it writes next is in another transaction.
func (tx *refTx) endBehindTheStore(end TxEnd) {
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	if end == EndCommit || end == EndCommitBegin {
		tx.apply()
	}
	tx.staged = map[string]int{}
	tx.outside = true
}

func refTxFrom(ctx context.Context) (*refTx, error) {
	tx, ok := idem.TxFrom(ctx)
	if !ok {
		return nil, errors.New("refstore: no transaction in the context")
	}
	rt, ok := tx.Handle().(*refTx)
	if !ok {
		return nil, errors.New("refstore: the context's transaction is not a refstore one")
	}
	return rt, nil
}

// refHarness drives a refStore with mutation m, with every hook.
func refHarness(m mutation) Harness {
	return Harness{
		NewLocation: func(testing.TB) string { return "" },
		Open: func(context.Context, string) (idem.Store, error) {
			return newRefStore(m), nil
		},
		Effect: func(ctx context.Context, name string) error {
			tx, err := refTxFrom(ctx)
			if err == nil {
				tx.staged[name]++
			}
			return err
		},
		CountEffects: func(_ context.Context, s idem.Store, name string) (int, error) {
			rs := s.(*refStore)
			rs.mu.Lock()
			defer rs.mu.Unlock()
			return rs.effects[name], nil
		},
		PlantRecord: func(_ context.Context, s idem.Store, rec *idem.Record) (bool, error) {
			rs := s.(*refStore)
			rs.mu.Lock()
			defer rs.mu.Unlock()
			rs.records[refKey{rec.Scope, rec.Key}] = *refClone(*rec)
			return false, nil
		},
		EndTx: func(ctx context.Context, end TxEnd) error {
			tx, err := refTxFrom(ctx)
			if err == nil {
				tx.endBehindTheStore(end)
			}
			return err
		},
		FailCommit: func(ctx context.Context) error {
			tx, err := refTxFrom(ctx)
			if err == nil {
				tx.doomed = true
			}
			return err
		},
	}
}

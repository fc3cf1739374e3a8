// Package memstore is an in-memory idem.Store for tests and examples.
//
// It keeps the full atomic-mode contract (a per-key try-lock that belongs to
// the transaction, a record committed together with the work's effect,
// uniqueness of (scope, key)) but nothing survives the process. Use it in
// unit tests of code built on idem, the way testing/fstest.MapFS stands in
// for a file system; use sqlitestore or pgstore in production.
//
// The work's effect goes through a small transactional key-value map: in
// the work, TxFrom(ctx) returns the *Tx, whose Set calls become visible
// through Store.Value only when the record commits.
package memstore

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/idemkit/idem"
)

type recordKey struct{ scope, key string }

// Store is an in-memory idem.Store. The zero value is not usable; call New.
type Store struct {
	mu      sync.Mutex
	records map[recordKey]idem.Record
	locks   map[recordKey]bool
	values  map[string]string
	steps   map[recordKey][]idem.Step // leased mode's recovery points
	audit   []idem.AuditEntry         // the Admin's log, oldest first
}

var (
	_ idem.Store          = (*Store)(nil)
	_ idem.Inspector      = (*Store)(nil)
	_ idem.ExpiredDeleter = (*Store)(nil)
	_ idem.Tx             = (*Tx)(nil)
)

// New returns an empty Store.
func New() *Store {
	return &Store{
		records: make(map[recordKey]idem.Record),
		locks:   make(map[recordKey]bool),
		values:  make(map[string]string),
		steps:   make(map[recordKey][]idem.Step),
	}
}

// Begin implements idem.Store.
func (s *Store) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	k := recordKey{p.Scope, p.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.records[k]; ok && !rec.Expired(p.Now) {
		return clone(rec), nil, nil
	}
	if s.locks[k] {
		return nil, nil, idem.ErrInFlight
	}
	s.locks[k] = true
	return nil, &Tx{store: s, key: k, staged: make(map[string]string)}, nil
}

// Lookup implements idem.Inspector.
func (s *Store) Lookup(ctx context.Context, p *idem.LookupParams) (*idem.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[recordKey{p.Scope, p.Key}]
	if !ok {
		return nil, idem.ErrNotFound
	}
	return clone(rec), nil
}

// DeleteExpired implements idem.ExpiredDeleter.
func (s *Store) DeleteExpired(ctx context.Context, p *idem.DeleteExpiredParams) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, rec := range s.records {
		if n >= p.Limit {
			break
		}
		if rec.Expired(p.Now) {
			delete(s.records, k)
			n++
		}
	}
	return n, nil
}

// clone copies a record deeply, so that callers never share the stored
// header map or body with the store (as with a real database).
func clone(r idem.Record) *idem.Record {
	r.Result.Header = maps.Clone(r.Result.Header)
	for k, v := range r.Result.Header {
		r.Result.Header[k] = slices.Clone(v)
	}
	r.Result.Body = slices.Clone(r.Result.Body)
	return &r
}

// Value returns a committed effect value written with Tx.Set.
func (s *Store) Value(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[name]
	return v, ok
}

// Tx is an open memstore transaction. Its Set calls are applied when the
// record commits and discarded on rollback.
type Tx struct {
	store  *Store
	key    recordKey
	staged map[string]string
	ended  bool
}

// TxFrom returns the *Tx that the work passed to idem.Guard.Do runs in.
func TxFrom(ctx context.Context) (*Tx, bool) {
	tx, ok := idem.TxFrom(ctx)
	if !ok {
		return nil, false
	}
	mtx, ok := tx.Handle().(*Tx)
	return mtx, ok
}

// Set stages an effect: name is set to value when the transaction commits.
func (tx *Tx) Set(name, value string) { tx.staged[name] = value }

// Get returns the value of name as this transaction sees it.
func (tx *Tx) Get(name string) (string, bool) {
	if v, ok := tx.staged[name]; ok {
		return v, true
	}
	return tx.store.Value(name)
}

// Handle implements idem.Tx; it returns tx itself.
func (tx *Tx) Handle() any { return tx }

// Commit implements idem.Tx.
func (tx *Tx) Commit(ctx context.Context, p *idem.CommitParams) error {
	s := tx.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if tx.ended {
		return nil
	}
	tx.ended = true
	delete(s.locks, tx.key)
	if err := ctx.Err(); err != nil {
		return err
	}
	if old, ok := s.records[tx.key]; ok && !old.Expired(p.Now) {
		return idem.ErrConflict
	}
	s.records[tx.key] = *clone(*p.Record)
	maps.Copy(s.values, tx.staged)
	return nil
}

// Rollback implements idem.Tx.
func (tx *Tx) Rollback(ctx context.Context) error {
	s := tx.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if !tx.ended {
		tx.ended = true
		delete(s.locks, tx.key)
	}
	return nil
}

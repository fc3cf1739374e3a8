package memstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/idemkit/idem"
)

var _ idem.Admin = (*Store)(nil)

func compareKeys(a, b recordKey) int {
	return cmp.Or(cmp.Compare(a.scope, b.scope), cmp.Compare(a.key, b.key))
}

// List implements idem.Admin: the reference, which sorts the matching
// records on every call (it is for tests).
func (s *Store) List(ctx context.Context, p *idem.ListParams) (*idem.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, fmt.Errorf("memstore: List: limit must be positive, got %d", p.Limit)
	}
	var after recordKey
	if p.Cursor != "" {
		var err error
		if after.scope, after.key, err = idem.ParseListCursor(p.Cursor); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []recordKey
	for k, rec := range s.records {
		if (p.Cursor == "" || compareKeys(k, after) > 0) && p.Matches(&rec) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	page := &idem.ListPage{Records: []*idem.Record{}}
	for _, k := range keys[:min(len(keys), p.Limit)] {
		rec := clone(s.records[k])
		rec.Input = nil
		page.Records = append(page.Records, rec)
	}
	if len(keys) > p.Limit {
		last := keys[p.Limit-1]
		page.Next = idem.ListCursor(last.scope, last.key)
	}
	return page, nil
}

// Steps implements idem.Admin.
func (s *Store) Steps(ctx context.Context, p *idem.LookupParams) ([]idem.Step, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []idem.Step{}
	for _, st := range s.steps[recordKey{p.Scope, p.Key}] {
		out = append(out, idem.Step{Name: st.Name, Output: slices.Clone(st.Output)})
	}
	return out, nil
}

// Forget implements idem.Admin.
func (s *Store) Forget(ctx context.Context, p *idem.ForgetParams) (*idem.Record, error) {
	return s.change(ctx, p.Scope, p.Key, p.Audit, 0, func(rec *idem.Record, locked bool) (bool, error) {
		return true, idem.CheckForget(rec, p, locked)
	})
}

// Resolve implements idem.Admin.
func (s *Store) Resolve(ctx context.Context, p *idem.ResolveParams) (*idem.Record, error) {
	return s.change(ctx, p.Scope, p.Key, p.Audit, p.Result.Status, func(rec *idem.Record, locked bool) (bool, error) {
		if err := idem.CheckResolve(rec, p, locked); err != nil {
			return false, err
		}
		rec.State = idem.StateCompleted
		rec.Result = idem.Result{Status: p.Result.Status, Header: p.Result.Header, Body: slices.Clone(p.Result.Body)}
		if rec.Result.Body == nil {
			rec.Result.Body = []byte{}
		}
		rec.ExpiresAt = p.ExpiresAt
		rec.LastError = ""
		return false, nil
	})
}

// change applies fn to a copy of the record of (scope, key): on success it
// deletes the record (fn returns true) or stores the copy, deletes the
// steps and appends the audit entry, under one hold of s.mu.
func (s *Store) change(ctx context.Context, scope, key string, e idem.AuditEntry, status int,
	fn func(rec *idem.Record, locked bool) (del bool, err error)) (*idem.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := recordKey{scope, key}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.records[k]
	if !ok {
		return nil, idem.ErrNotFound
	}
	before := clone(old)
	work := *clone(old)
	del, err := fn(&work, s.locks[k])
	if err != nil {
		if errors.Is(err, idem.ErrFenced) || errors.Is(err, idem.ErrLeaseLive) || errors.Is(err, idem.ErrPending) || errors.Is(err, idem.ErrNotPending) {
			return before, err
		}
		return nil, err
	}
	if del {
		delete(s.records, k)
	} else {
		s.records[k] = work
	}
	delete(s.steps, k)
	e.ID = int64(len(s.audit)) + 1
	e.Scope, e.Key, e.Status = scope, key, status
	e.Before = clone(old)
	s.audit = append(s.audit, e)
	return before, nil
}

// Audit implements idem.Admin.
func (s *Store) Audit(ctx context.Context, p *idem.AuditParams) (*idem.AuditPage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, fmt.Errorf("memstore: Audit: limit must be positive, got %d", p.Limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	page := &idem.AuditPage{Entries: []*idem.AuditEntry{}}
	end := len(s.audit)
	if p.Cursor > 0 {
		end = min(end, int(p.Cursor)-1)
	}
	for i := end - 1; i >= 0 && len(page.Entries) < p.Limit; i-- {
		e := s.audit[i]
		e.Before = clone(*e.Before)
		page.Entries = append(page.Entries, &e)
	}
	if n := len(page.Entries); n == p.Limit && page.Entries[n-1].ID > 1 {
		page.Next = page.Entries[n-1].ID
	}
	return page, nil
}

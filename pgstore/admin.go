package pgstore

import (
	"context"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
)

var _ idem.Admin = (*Store)(nil)

// List implements idem.Admin: one query per page, on the primary key from
// the cursor on (keyset pagination), so a page costs the same on the first
// and the millionth record.
func (s *Store) List(ctx context.Context, p *idem.ListParams) (*idem.ListPage, error) {
	q, args, err := s.admin.List(p)
	if err != nil {
		return nil, fmt.Errorf("pgstore: List: %w", err)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, unavailable("list", err)
	}
	defer rows.Close()
	page := &idem.ListPage{Records: []*idem.Record{}}
	for rows.Next() {
		rec, err := pgschema.ScanLeased(rows)
		if err != nil {
			return nil, unavailable("list", err)
		}
		page.Records = append(page.Records, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list", err)
	}
	if len(page.Records) > p.Limit {
		page.Records = page.Records[:p.Limit]
		last := page.Records[p.Limit-1]
		page.Next = idem.ListCursor(last.Scope, last.Key)
	}
	return page, nil
}

// Steps implements idem.Admin.
func (s *Store) Steps(ctx context.Context, p *idem.LookupParams) ([]idem.Step, error) {
	rows, err := s.pool.Query(ctx, s.admin.Steps, p.Scope, p.Key)
	if err != nil {
		return nil, unavailable("steps", err)
	}
	defer rows.Close()
	steps := []idem.Step{}
	for rows.Next() {
		var st idem.Step
		if err := rows.Scan(&st.Name, &st.Output); err != nil {
			return nil, unavailable("steps", err)
		}
		steps = append(steps, st)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("steps", err)
	}
	return steps, nil
}

// Forget implements idem.Admin: the locked read, the check, the delete and
// the audit row are one transaction. A row held by a local step in
// progress is ErrLeaseLive, at once.
func (s *Store) Forget(ctx context.Context, p *idem.ForgetParams) (*idem.Record, error) {
	return s.change(ctx, "forget", p.Scope, p.Key, &p.Audit, 0, func(tx pgx.Tx, rec *idem.Record) error {
		if err := idem.CheckForget(rec, p, false); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.admin.Delete, p.Scope, p.Key)
		return err
	})
}

// Resolve implements idem.Admin, in one transaction as Forget. The record
// keeps its token, so its former holder stays fenced.
func (s *Store) Resolve(ctx context.Context, p *idem.ResolveParams) (*idem.Record, error) {
	args, err := pgschema.ResolveArgs(p)
	if err != nil {
		return nil, err
	}
	return s.change(ctx, "resolve", p.Scope, p.Key, &p.Audit, p.Result.Status, func(tx pgx.Tx, rec *idem.Record) error {
		if err := idem.CheckResolve(rec, p, false); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.admin.Resolve, args...)
		return err
	})
}

// change locks and reads the record of (scope, key) in a transaction, lets
// apply check and change it, deletes its steps and appends the audit row,
// then commits. On a refusal it returns the record with the error.
func (s *Store) change(ctx context.Context, op, scope, key string, e *idem.AuditEntry, status int,
	apply func(tx pgx.Tx, rec *idem.Record) error) (*idem.Record, error) {
	var rec *idem.Record
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		rec, err = pgschema.ScanLeased(tx.QueryRow(ctx, s.admin.Lock, scope, key))
		switch {
		case pgschema.IsLocked(err):
			return fmt.Errorf("pgstore: %s %s: a transaction holds it: %w", op, recordName(scope, key), idem.ErrLeaseLive)
		case err != nil:
			return err
		case rec == nil:
			return idem.ErrNotFound
		}
		if err := apply(tx, rec); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.admin.DeleteSteps, scope, key); err != nil {
			return err
		}
		args, err := pgschema.AuditArgs(e, scope, key, status, rec)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.admin.InsertAudit, args...)
		return err
	})
	switch {
	case err == nil:
		return rec, nil
	case pgschema.Refusal(err):
		return rec, err
	}
	return nil, unavailable(op, err)
}

// Audit implements idem.Admin.
func (s *Store) Audit(ctx context.Context, p *idem.AuditParams) (*idem.AuditPage, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("pgstore: Audit: limit must be positive, got %d", p.Limit)
	}
	rows, err := s.pool.Query(ctx, s.admin.Audit, pgschema.AuditCursor(p.Cursor), p.Limit+1)
	if err != nil {
		return nil, unavailable("audit", err)
	}
	defer rows.Close()
	page := &idem.AuditPage{Entries: []*idem.AuditEntry{}}
	for rows.Next() {
		e, err := pgschema.ScanAudit(rows)
		if err != nil {
			return nil, unavailable("audit", err)
		}
		page.Entries = append(page.Entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("audit", err)
	}
	if len(page.Entries) > p.Limit {
		page.Entries = page.Entries[:p.Limit]
		page.Next = page.Entries[p.Limit-1].ID
	}
	return page, nil
}

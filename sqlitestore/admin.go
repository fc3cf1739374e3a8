package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem"
)

var _ idem.Admin = (*Store)(nil)

// listColumns are scanRecord's columns without the body and the input,
// which a listing does not show, then scope and key.
const listColumns = `fingerprint, state, status, header, X'', created_at, expires_at,
	token, lease_until, kind, NULL, attempts, last_error, ttl, scope, key`

// List implements idem.Admin: one query per page, on the primary key from
// the cursor on (keyset pagination), so a page costs the same on the first
// and the millionth record. It works on a read-only store.
func (s *Store) List(ctx context.Context, p *idem.ListParams) (*idem.ListPage, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("sqlitestore: List: limit must be positive, got %d", p.Limit)
	}
	var (
		where []string
		args  []any
	)
	if p.Cursor != "" {
		scope, key, err := idem.ParseListCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		where, args = append(where, `(scope, key) > (?, ?)`), append(args, scope, key)
	}
	if p.Scope != "" {
		where, args = append(where, `scope = ?`), append(args, p.Scope)
	}
	if p.Prefix != "" {
		// Keys are visible ASCII: every key that begins with the prefix
		// sorts in [prefix, prefix + "\x7f").
		where, args = append(where, `key >= ? AND key < ?`), append(args, p.Prefix, p.Prefix+"\x7f")
	}
	if !p.CreatedBefore.IsZero() {
		where, args = append(where, `created_at < ?`), append(args, p.CreatedBefore.UnixNano())
	}
	switch p.State {
	case idem.ListCompleted:
		where, args = append(where, `state = 'completed' AND expires_at > ?`), append(args, p.Now.UnixNano())
	case idem.ListExpired:
		where, args = append(where, `state = 'completed' AND expires_at <= ?`), append(args, p.Now.UnixNano())
	case idem.ListPending:
		where = append(where, `state = 'pending'`)
	}
	q := `SELECT ` + listColumns + ` FROM idem_records`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY scope, key LIMIT ?`
	args = append(args, p.Limit+1)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, unavailable("list", err)
	}
	defer rows.Close()
	page := &idem.ListPage{Records: []*idem.Record{}}
	for rows.Next() {
		var scope, key string
		rec, err := scanRecord(rows, "", "", &scope, &key)
		if err != nil {
			return nil, unavailable("list", err)
		}
		rec.Scope, rec.Key, rec.Input = scope, key, nil
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
	rows, err := s.db.QueryContext(ctx, selectSteps, p.Scope, p.Key)
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

// Forget implements idem.Admin: the read, the check, the delete and the
// audit row are one IMMEDIATE transaction. A local step in progress holds
// the writer, so Forget waits for it to end.
func (s *Store) Forget(ctx context.Context, p *idem.ForgetParams) (*idem.Record, error) {
	return s.change(ctx, "forget", p.Scope, p.Key, p.Audit, 0, func(tx *sql.Tx, rec *idem.Record) error {
		if err := idem.CheckForget(rec, p, false); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM idem_records WHERE scope = ? AND key = ?`, p.Scope, p.Key)
		return err
	})
}

// Resolve implements idem.Admin, in one IMMEDIATE transaction as Forget.
// The record keeps its token, so its former holder stays fenced.
func (s *Store) Resolve(ctx context.Context, p *idem.ResolveParams) (*idem.Record, error) {
	header, err := encodeHeader(p.Result.Header)
	if err != nil {
		return nil, err
	}
	body := p.Result.Body
	if body == nil {
		body = []byte{}
	}
	return s.change(ctx, "resolve", p.Scope, p.Key, p.Audit, p.Result.Status, func(tx *sql.Tx, rec *idem.Record) error {
		if err := idem.CheckResolve(rec, p, false); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE idem_records SET state = 'completed', status = ?, header = ?, body = ?,
			expires_at = ?, last_error = '' WHERE scope = ? AND key = ?`,
			p.Result.Status, header, body, p.ExpiresAt.UnixNano(), p.Scope, p.Key)
		return err
	})
}

// refusal reports whether err is one of Admin's refusals, which pass
// unwrapped.
func refusal(err error) bool {
	for _, e := range []error{idem.ErrNotFound, idem.ErrFenced, idem.ErrLeaseLive, idem.ErrPending, idem.ErrNotPending} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// change reads the record of (scope, key) in a write transaction, lets
// apply check and change it, deletes its steps and appends the audit row,
// then commits. On a refusal it returns the record with the error.
func (s *Store) change(ctx context.Context, op, scope, key string, e idem.AuditEntry, status int,
	apply func(tx *sql.Tx, rec *idem.Record) error) (*idem.Record, error) {
	if s.file == nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, ErrReadOnly)
	}
	conn, tx, err := s.beginWrite(ctx, op, false)
	if err != nil {
		return nil, unavailable(op, err)
	}
	rec, err := s.changeTx(ctx, tx, scope, key, e, status, apply)
	if err != nil {
		_ = s.endWrite(conn, tx)
		if refusal(err) {
			return rec, err
		}
		return nil, unavailable(op, err)
	}
	if err := s.commitWrite(ctx, conn, tx); err != nil {
		return nil, unavailable(op, err)
	}
	return rec, nil
}

func (s *Store) changeTx(ctx context.Context, tx *sql.Tx, scope, key string, e idem.AuditEntry, status int,
	apply func(tx *sql.Tx, rec *idem.Record) error) (*idem.Record, error) {
	rec, err := lookup(ctx, tx.StmtContext(ctx, s.read), scope, key)
	if err != nil {
		return nil, err
	}
	if err := apply(tx, rec); err != nil {
		return rec, err
	}
	if _, err := tx.ExecContext(ctx, deleteSteps, scope, key); err != nil {
		return nil, err
	}
	before, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO idem_audit (at, actor, action, reason, scope, key, status, before)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, e.At.UnixNano(), e.Actor, e.Action, e.Reason, scope, key, status, before); err != nil {
		return nil, err
	}
	return rec, nil
}

// Audit implements idem.Admin. It works on a read-only store.
func (s *Store) Audit(ctx context.Context, p *idem.AuditParams) (*idem.AuditPage, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("sqlitestore: Audit: limit must be positive, got %d", p.Limit)
	}
	cursor := p.Cursor
	if cursor <= 0 {
		cursor = 1<<63 - 1
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, at, actor, action, reason, scope, key, status, before
		FROM idem_audit WHERE id < ? ORDER BY id DESC LIMIT ?`, cursor, p.Limit+1)
	if err != nil {
		return nil, unavailable("audit", err)
	}
	defer rows.Close()
	page := &idem.AuditPage{Entries: []*idem.AuditEntry{}}
	for rows.Next() {
		var (
			e      idem.AuditEntry
			at     int64
			before []byte
		)
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Reason, &e.Scope, &e.Key, &e.Status, &before); err != nil {
			return nil, unavailable("audit", err)
		}
		e.At = time.Unix(0, at).UTC()
		if err := json.Unmarshal(before, &e.Before); err != nil {
			return nil, fmt.Errorf("sqlitestore: audit row %d: %w", e.ID, err)
		}
		page.Entries = append(page.Entries, &e)
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

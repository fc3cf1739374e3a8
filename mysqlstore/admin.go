package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/idemkit/idem"
)

// auditMigration is migration 3: the audit log of idem.Admin, one row per
// change an operator made, written in the change's transaction. before is
// the record as it was, as encoding/json writes an idem.Record; at is
// microseconds since the epoch.
func auditMigration(n names) []string {
	return []string{`CREATE TABLE IF NOT EXISTS ` + n.audit + ` (
	id       BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
	at       BIGINT         NOT NULL,
	actor    BLOB           NOT NULL,
	action   VARBINARY(64)  NOT NULL,
	reason   BLOB           NOT NULL,
	scope    VARBINARY(255) NOT NULL,
	` + "`key`" + `    VARBINARY(255) NOT NULL,
	status   INT            NOT NULL,
	` + "`before`" + ` LONGBLOB       NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`}
}

var _ idem.Admin = (*Store)(nil)

// errLockNowait is MySQL's ER_LOCK_NOWAIT; MariaDB answers NOWAIT with
// errLockWaitTimeout.
const errLockNowait = 3572

// listColumns are recordColumns without the body and the input, which a
// listing does not show.
const listColumns = "fingerprint, state, status, headers, '', created_at, expires_at, token, lease_until, kind, NULL, attempts, last_error, ttl_us"

// List implements idem.Admin: one query per page, on the primary key from
// the cursor on (keyset pagination), so a page costs the same on the first
// and the millionth record.
func (s *Store) List(ctx context.Context, p *idem.ListParams) (*idem.ListPage, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("mysqlstore: List: limit must be positive, got %d", p.Limit)
	}
	var where []string
	if p.Cursor != "" {
		scope, key, err := idem.ParseListCursor(p.Cursor)
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: List: %w", err)
		}
		where = append(where, "(scope > "+hexLit(scope)+" OR (scope = "+hexLit(scope)+" AND `key` > "+hexLit(key)+"))")
	}
	if p.Scope != "" {
		where = append(where, "scope = "+hexLit(p.Scope))
	}
	if p.Prefix != "" {
		where = append(where, "LEFT(`key`, "+intLit(int64(len(p.Prefix)))+") = "+hexLit(p.Prefix))
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, "created_at < "+intLit(micros(p.CreatedBefore)))
	}
	switch p.State {
	case idem.ListCompleted:
		where = append(where, "state = 'completed' AND expires_at > "+intLit(micros(p.Now)))
	case idem.ListExpired:
		where = append(where, "state = 'completed' AND expires_at <= "+intLit(micros(p.Now)))
	case idem.ListPending:
		where = append(where, "state = 'pending'")
	}
	q := "SELECT scope, `key`, " + listColumns + " FROM " + s.names.table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY scope, `key` LIMIT " + intLit(int64(p.Limit)+1)
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, unavailable("list", err)
	}
	defer rows.Close()
	page := &idem.ListPage{Records: []*idem.Record{}}
	for rows.Next() {
		var (
			scope, key []byte
			nr         nullRecord
		)
		if err := rows.Scan(append([]any{&scope, &key}, nr.dest()...)...); err != nil {
			return nil, unavailable("list", err)
		}
		rec, err := nr.record(string(scope), string(key))
		if err != nil {
			return nil, unavailable("list", err)
		}
		rec.Input = nil
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
	rows, err := s.db.QueryContext(ctx, "SELECT name, output FROM "+s.names.steps+" WHERE "+keyIs(p.Scope, p.Key)+" ORDER BY seq")
	if err != nil {
		return nil, unavailable("steps", err)
	}
	defer rows.Close()
	steps := []idem.Step{}
	for rows.Next() {
		var (
			st   idem.Step
			name []byte
		)
		if err := rows.Scan(&name, &st.Output); err != nil {
			return nil, unavailable("steps", err)
		}
		st.Name = string(name)
		steps = append(steps, st)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("steps", err)
	}
	return steps, nil
}

// Forget implements idem.Admin: the locked read, the check, the delete and
// the audit row are one transaction. A row held by a local step in
// progress is ErrLeaseLive, at once (FOR UPDATE NOWAIT).
func (s *Store) Forget(ctx context.Context, p *idem.ForgetParams) (*idem.Record, error) {
	return s.change(ctx, "forget", p.Scope, p.Key, &p.Audit, 0, func(tx *sql.Tx, rec *idem.Record) error {
		if err := idem.CheckForget(rec, p, false); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM "+s.names.table+" WHERE "+keyIs(p.Scope, p.Key))
		return err
	})
}

// Resolve implements idem.Admin, in one transaction as Forget. The record
// keeps its token, so its former holder stays fenced.
func (s *Store) Resolve(ctx context.Context, p *idem.ResolveParams) (*idem.Record, error) {
	headers, err := headersLit(p.Result.Header)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: resolve: %w", err)
	}
	body := p.Result.Body
	if body == nil {
		body = []byte{}
	}
	return s.change(ctx, "resolve", p.Scope, p.Key, &p.Audit, p.Result.Status, func(tx *sql.Tx, rec *idem.Record) error {
		if err := idem.CheckResolve(rec, p, false); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE "+s.names.table+" SET state = 'completed', status = "+intLit(int64(p.Result.Status))+
			", headers = "+headers+", body = "+hexLit(body)+", expires_at = "+intLit(micros(p.ExpiresAt))+", last_error = ''"+
			" WHERE "+keyIs(p.Scope, p.Key))
		return err
	})
}

// change locks and reads the record of (scope, key) in a transaction, lets
// apply check and change it, deletes its steps and appends the audit row,
// then commits. On a refusal it returns the record with the error.
func (s *Store) change(ctx context.Context, op, scope, key string, e *idem.AuditEntry, status int,
	apply func(tx *sql.Tx, rec *idem.Record) error) (*idem.Record, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, unavailable(op, err)
	}
	rec, err := s.changeIn(ctx, tx, op, scope, key, e, status, apply)
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	switch {
	case err == nil:
		return rec, nil
	case refusal(err):
		return rec, err
	}
	return nil, unavailable(op, ctxCause(ctx, err))
}

func (s *Store) changeIn(ctx context.Context, tx *sql.Tx, op, scope, key string, e *idem.AuditEntry, status int,
	apply func(tx *sql.Tx, rec *idem.Record) error) (*idem.Record, error) {
	var nr nullRecord
	err := tx.QueryRowContext(ctx, "SELECT "+recordColumns+" FROM "+s.names.table+" WHERE "+keyIs(scope, key)+" FOR UPDATE NOWAIT").Scan(nr.dest()...)
	switch {
	case isErr(err, errLockNowait), isErr(err, errLockWaitTimeout):
		return nil, fmt.Errorf("mysqlstore: %s %s: a transaction holds it: %w", op, recordName(scope, key), idem.ErrLeaseLive)
	case errors.Is(err, sql.ErrNoRows):
		return nil, idem.ErrNotFound
	case err != nil:
		return nil, err
	}
	rec, err := nr.record(scope, key)
	if err != nil {
		return nil, err
	}
	if err := apply(tx, rec); err != nil {
		return rec, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+s.names.steps+" WHERE "+keyIs(scope, key)); err != nil {
		return rec, err
	}
	before, err := json.Marshal(rec)
	if err != nil {
		return rec, err
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO "+s.names.audit+" (at, actor, action, reason, scope, `key`, status, `before`) VALUES ("+
		intLit(micros(e.At))+", "+hexLit(e.Actor)+", "+hexLit(e.Action)+", "+hexLit(e.Reason)+", "+hexLit(scope)+", "+hexLit(key)+", "+
		intLit(int64(status))+", "+hexLit(before)+")")
	return rec, err
}

// refusal reports whether err is one of idem.Admin's refusals, which the
// store returns unwrapped.
func refusal(err error) bool {
	for _, e := range []error{idem.ErrNotFound, idem.ErrFenced, idem.ErrLeaseLive, idem.ErrPending, idem.ErrNotPending} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Audit implements idem.Admin.
func (s *Store) Audit(ctx context.Context, p *idem.AuditParams) (*idem.AuditPage, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("mysqlstore: Audit: limit must be positive, got %d", p.Limit)
	}
	cursor := p.Cursor
	if cursor <= 0 {
		cursor = 1<<63 - 1
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id, at, actor, action, reason, scope, `key`, status, `before` FROM "+s.names.audit+
		" WHERE id < "+intLit(cursor)+" ORDER BY id DESC LIMIT "+intLit(int64(p.Limit)+1))
	if err != nil {
		return nil, unavailable("audit", err)
	}
	defer rows.Close()
	page := &idem.AuditPage{Entries: []*idem.AuditEntry{}}
	for rows.Next() {
		var (
			e                                         idem.AuditEntry
			at                                        int64
			actor, action, reason, scope, key, before []byte
		)
		if err := rows.Scan(&e.ID, &at, &actor, &action, &reason, &scope, &key, &e.Status, &before); err != nil {
			return nil, unavailable("audit", err)
		}
		e.At = fromMicros(at)
		e.Actor, e.Action, e.Reason, e.Scope, e.Key = string(actor), string(action), string(reason), string(scope), string(key)
		if err := json.Unmarshal(before, &e.Before); err != nil {
			return nil, fmt.Errorf("mysqlstore: audit row %d: %w", e.ID, err)
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

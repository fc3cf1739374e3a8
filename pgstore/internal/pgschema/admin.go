package pgschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemkit/idem"
)

// listColumns are leasedColumns without the body and the input, which a
// listing does not show, for ScanLeased.
const listColumns = `scope, key, fingerprint, state, status, headers, ''::bytea, created_at, expires_at, token, lease_until, kind, NULL::bytea, attempts, last_error, ttl_us`

// AdminStatements is the SQL of idem.Admin, built once per store. Forget
// and Resolve run, in one transaction: Lock, then Delete or Resolve, then
// DeleteSteps and InsertAudit.
type AdminStatements struct {
	// Lock reads the record of ($1 scope, $2 key) for ScanLeased and locks
	// its row, NOWAIT: a row held by a local step (or a claim in progress)
	// fails at once with lock_not_available (IsLocked).
	Lock string
	// Delete deletes the record of ($1 scope, $2 key).
	Delete string
	// Resolve makes the record of ($1, $2) completed with status $3,
	// headers $4 (jsonb as text, NULL for none), body $5, expiring at $6.
	Resolve string
	// DeleteSteps deletes the steps of ($1, $2).
	DeleteSteps string
	// Steps reads the steps of ($1, $2) in the order first saved.
	Steps string
	// InsertAudit appends an entry: at, actor, action, reason, scope,
	// key, status and before (jsonb as text).
	InsertAudit string
	// Audit reads at most $2 entries whose id is below $1, newest first,
	// for ScanAudit.
	Audit string

	table string
}

// NewAdminStatements returns idem.Admin's statements on the tables n names.
func NewAdminStatements(n Names) AdminStatements {
	where := ` WHERE scope = $1 AND key = $2`
	return AdminStatements{
		Lock:        `SELECT ` + leasedColumns + ` FROM ` + n.Table + where + ` FOR UPDATE NOWAIT`,
		Delete:      `DELETE FROM ` + n.Table + where,
		Resolve:     `UPDATE ` + n.Table + ` SET state = 'completed', status = $3, headers = $4, body = $5, expires_at = $6, last_error = ''` + where,
		DeleteSteps: `DELETE FROM ` + n.Steps + where,
		Steps:       `SELECT name, output FROM ` + n.Steps + where + ` ORDER BY seq`,
		InsertAudit: `INSERT INTO ` + n.Audit + ` (at, actor, action, reason, scope, key, status, before) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		Audit:       `SELECT id, at, actor, action, reason, scope, key, status, before FROM ` + n.Audit + ` WHERE id < $1 ORDER BY id DESC LIMIT $2`,
		table:       n.Table,
	}
}

// List returns the query of one page of idem.Admin.List and its
// parameters: a keyset page on the primary key from the cursor on, one row
// more than p.Limit, so that the caller knows whether another page
// follows. Its rows are for ScanLeased.
func (a *AdminStatements) List(p *idem.ListParams) (string, []any, error) {
	if p.Limit <= 0 {
		return "", nil, fmt.Errorf("limit must be positive, got %d", p.Limit)
	}
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.Cursor != "" {
		scope, key, err := idem.ParseListCursor(p.Cursor)
		if err != nil {
			return "", nil, err
		}
		where = append(where, `(scope, key) > (`+arg(scope)+`, `+arg(key)+`)`)
	}
	if p.Scope != "" {
		where = append(where, `scope = `+arg(p.Scope))
	}
	if p.Prefix != "" {
		where = append(where, `starts_with(key, `+arg(p.Prefix)+`)`)
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, `created_at < `+arg(p.CreatedBefore))
	}
	switch p.State {
	case idem.ListCompleted:
		where = append(where, `state = 'completed' AND expires_at > `+arg(p.Now))
	case idem.ListExpired:
		where = append(where, `state = 'completed' AND expires_at <= `+arg(p.Now))
	case idem.ListPending:
		where = append(where, `state = 'pending'`)
	}
	q := `SELECT ` + listColumns + ` FROM ` + a.table
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY scope, key LIMIT ` + arg(p.Limit+1)
	return q, args, nil
}

// AuditArgs returns the parameters of InsertAudit.
func AuditArgs(e *idem.AuditEntry, scope, key string, status int, before *idem.Record) ([]any, error) {
	b, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	return []any{e.At, e.Actor, e.Action, e.Reason, scope, key, status, string(b)}, nil
}

// ResolveArgs returns the parameters of Resolve.
func ResolveArgs(p *idem.ResolveParams) ([]any, error) {
	headers, err := headersArg(p.Result.Header)
	if err != nil {
		return nil, err
	}
	body := p.Result.Body
	if body == nil {
		body = []byte{}
	}
	return []any{p.Scope, p.Key, p.Result.Status, headers, body, p.ExpiresAt}, nil
}

// AuditCursor is the $1 of Audit for a page cursor (0: the newest).
func AuditCursor(c int64) int64 {
	if c <= 0 {
		return 1<<63 - 1
	}
	return c
}

// ScanAudit reads a row of Audit.
func ScanAudit(row Row) (*idem.AuditEntry, error) {
	var (
		e      idem.AuditEntry
		before []byte
	)
	if err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Reason, &e.Scope, &e.Key, &e.Status, &before); err != nil {
		return nil, err
	}
	e.At = e.At.UTC()
	if err := json.Unmarshal(before, &e.Before); err != nil {
		return nil, fmt.Errorf("audit row %d: %w", e.ID, err)
	}
	return &e, nil
}

// IsLocked reports whether err is lock_not_available: Lock found the row
// held by another transaction.
func IsLocked(err error) bool {
	code, ok := SQLState(err)
	return ok && code == "55P03"
}

// Refusal reports whether err is one of idem.Admin's refusals, which the
// stores return unwrapped.
func Refusal(err error) bool {
	for _, e := range []error{idem.ErrNotFound, idem.ErrFenced, idem.ErrLeaseLive, idem.ErrPending, idem.ErrNotPending} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

package idem

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Admin is the optional contract of the stores in which an operator can look
// after records (idem keys, forget, pending, resolve and the console; see
// docs/OPERATIONS.md). Every change it makes is written to the store's
// audit log in the same transaction as the change, so that nothing is
// deleted or rewritten without a row there. Stores never read the clock:
// the time comes in the params. Connection and server failures should
// match ErrUnavailable. An Admin is safe for concurrent use, beside the
// Store or LeasedStore it also is.
//
// The admintest package is its conformance suite.
type Admin interface {
	// List returns a page of at most p.Limit records that match p, in the
	// store's order of (Scope, Key), beginning after p.Cursor. The page's
	// Next is the cursor of the following page, "" after the last one. A
	// page is read with one bounded query (keyset pagination), so listing
	// millions of records never holds more than a page. Records come
	// without Input (Result.Body may be left out too).
	List(ctx context.Context, p *ListParams) (*ListPage, error)

	// Steps returns the recovery points of (p.Scope, p.Key) in the order
	// they were saved (none for a record that is not pending).
	Steps(ctx context.Context, p *LookupParams) ([]Step, error)

	// Forget deletes the record of (p.Scope, p.Key) and its steps, so that
	// the next request with the key runs again, and appends p.Audit with
	// the record as it was, atomically. It deletes a completed record,
	// live or expired, and a pending one only with p.Force. It never
	// deletes a pending record whose lease is live at p.Now (LeaseUntil
	// after p.Now) or whose local step is in progress: that is
	// ErrLeaseLive, even with p.Force. It returns the deleted record.
	Forget(ctx context.Context, p *ForgetParams) (*Record, error)

	// Resolve makes the pending record of (p.Scope, p.Key) completed with
	// p.Result, expiring at p.ExpiresAt, deletes its steps and appends
	// p.Audit with the record as it was, atomically: retries then get
	// p.Result as a replay, and completers stop trying it. It is fenced
	// like a holder's write: a record under a live lease (or in a local
	// step) is ErrLeaseLive, a record that is not pending ErrNotPending.
	// It returns the record as it was.
	Resolve(ctx context.Context, p *ResolveParams) (*Record, error)

	// Audit returns a page of at most p.Limit audit entries, newest first,
	// beginning after p.Cursor (an entry ID; 0 for the newest).
	Audit(ctx context.Context, p *AuditParams) (*AuditPage, error)
}

// Errors of Admin.
var (
	// ErrLeaseLive means the record is pending under a live lease (its
	// holder may be running the work): an operator must never change it.
	ErrLeaseLive = errors.New("idem: record is held under a live lease")
	// ErrPending means Forget refused a pending record without Force.
	ErrPending = errors.New("idem: record is pending (leased work that never finished)")
	// ErrNotPending means Resolve found a record that is not pending: it
	// has an answer already (forget it first to change it).
	ErrNotPending = errors.New("idem: record is not pending")
)

// ListState selects records by state in ListParams.
type ListState string

// The states List selects by; "" selects every record.
const (
	// ListCompleted selects the completed records that are live at Now.
	ListCompleted ListState = "completed"
	// ListPending selects the pending records (leased mode).
	ListPending ListState = "pending"
	// ListExpired selects the completed records that have expired at Now
	// (the sweeper deletes them; until then they behave as missing).
	ListExpired ListState = "expired"
)

// ParseListState parses the name of a ListState ("" is every state).
func ParseListState(s string) (ListState, error) {
	switch st := ListState(s); st {
	case "", ListCompleted, ListPending, ListExpired:
		return st, nil
	}
	return "", fmt.Errorf("idem: unknown state %q (want completed, pending or expired)", s)
}

// ListParams are the arguments of Admin.List. The zero value of a filter
// selects every record.
type ListParams struct {
	// Scope selects one stored scope (see StoredScope) exactly.
	Scope string
	// Prefix selects the keys that begin with it.
	Prefix string
	State  ListState
	// CreatedBefore selects the records created before it.
	CreatedBefore time.Time
	// Now is the time against which ListCompleted and ListExpired are
	// decided.
	Now time.Time
	// Limit is the size of the page; it must be positive.
	Limit int
	// Cursor is the Next of the previous page, "" for the first.
	Cursor string
}

// ListPage is one page of Admin.List.
type ListPage struct {
	Records []*Record
	// Next is the cursor of the next page, "" after the last.
	Next string
}

// Matches reports whether r is selected by p's filters (not its cursor).
// Stores that filter in their own code, and tests, use it.
func (p *ListParams) Matches(r *Record) bool {
	switch {
	case p.Scope != "" && r.Scope != p.Scope,
		!strings.HasPrefix(r.Key, p.Prefix),
		!p.CreatedBefore.IsZero() && !r.CreatedAt.Before(p.CreatedBefore):
		return false
	}
	switch p.State {
	case ListCompleted:
		return r.State == StateCompleted && !r.Expired(p.Now)
	case ListPending:
		return r.State == StatePending
	case ListExpired:
		return r.State == StateCompleted && r.Expired(p.Now)
	}
	return true
}

// ListCursor is the cursor of the page after (scope, key), as the SQL
// stores encode it; ParseListCursor reads it back. Other stores may use
// any cursor of their own.
func ListCursor(scope, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(scope + "\x00" + key))
}

// ParseListCursor returns the (scope, key) of a ListCursor.
func ParseListCursor(c string) (scope, key string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", fmt.Errorf("idem: bad list cursor: %w", err)
	}
	scope, key, ok := strings.Cut(string(b), "\x00")
	if !ok {
		return "", "", errors.New("idem: bad list cursor")
	}
	return scope, key, nil
}

// ForgetParams are the arguments of Admin.Forget.
type ForgetParams struct {
	Scope, Key string
	// Force lets Forget delete a pending record whose lease has ended.
	Force bool
	// Token, if not zero, is the token the operator saw: a record whose
	// token is another (claimed again since) is refused with ErrFenced.
	Token int64
	Now   time.Time
	// Audit is the entry appended (its ID, At, Scope, Key, Status and
	// Before are set by the store).
	Audit AuditEntry
}

// ResolveParams are the arguments of Admin.Resolve.
type ResolveParams struct {
	Scope, Key string
	// Result is the answer that retries of the key will get.
	Result Result
	// ExpiresAt is when the resolved record expires.
	ExpiresAt time.Time
	// Token is as in ForgetParams.
	Token int64
	Now   time.Time
	// Audit is the entry appended (as in ForgetParams).
	Audit AuditEntry
}

// The actions of an audit entry.
const (
	AuditForget  = "forget"
	AuditResolve = "resolve"
	AuditAbandon = "abandon"
)

// AuditEntry is one change an operator made.
type AuditEntry struct {
	// ID grows with every entry of the store; the store assigns it.
	ID int64
	// At is when the change was made (the params' Now).
	At time.Time
	// Actor is who made it, Action what (AuditForget, AuditResolve or
	// AuditAbandon), Reason why.
	Actor, Action, Reason string
	Scope, Key            string
	// Status is the status of the answer Resolve recorded; 0 for Forget.
	Status int
	// Before is the record as it was before the change, without its
	// steps. Stores keep it as its encoding/json form.
	Before *Record
}

// AuditParams are the arguments of Admin.Audit.
type AuditParams struct {
	// Limit is the size of the page; it must be positive.
	Limit int
	// Cursor is the ID of the last entry of the previous page (the next
	// page holds older ones); 0 for the newest.
	Cursor int64
}

// AuditPage is one page of Admin.Audit.
type AuditPage struct {
	Entries []*AuditEntry
	// Next is the cursor of the next page; 0 after the last.
	Next int64
}

// CheckForget returns why Forget must refuse rec at p.Now, or nil. locked
// is whether a local step of the record is in progress. Stores that decide
// in their own code use it, so that every store refuses the same records.
func CheckForget(rec *Record, p *ForgetParams, locked bool) error {
	if p.Token != 0 && rec.Token != p.Token {
		return fmt.Errorf("idem: the record's token is %d, not %d: %w", rec.Token, p.Token, ErrFenced)
	}
	if rec.State != StatePending {
		return nil
	}
	if locked || rec.LeaseUntil.After(p.Now) {
		return ErrLeaseLive
	}
	if !p.Force {
		return ErrPending
	}
	return nil
}

// CheckResolve is CheckForget's twin for Resolve.
func CheckResolve(rec *Record, p *ResolveParams, locked bool) error {
	if p.Token != 0 && rec.Token != p.Token {
		return fmt.Errorf("idem: the record's token is %d, not %d: %w", rec.Token, p.Token, ErrFenced)
	}
	if rec.State != StatePending {
		return ErrNotPending
	}
	if locked || rec.LeaseUntil.After(p.Now) {
		return ErrLeaseLive
	}
	return nil
}

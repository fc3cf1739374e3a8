package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
)

// The operators' commands (keys, forget, pending, resolve) and the console
// of serve -admin share what is here: opening the store as an idem.Admin,
// finding a record by the scope an operator types, and the fenced changes
// with their audit entries (see docs/OPERATIONS.md).

// adminPage is how many records or audit entries one store call reads.
const adminPage = 500

// adminStore is an opened -db as an idem.Admin, with its Inspector.
type adminStore struct {
	admin idem.Admin
	insp  idem.Inspector
	close func() error
	// guard, when set, is the serving Guard of the store: forget goes
	// through it, so that its replay cache drops the record at once.
	guard *idem.Guard
}

// openAdmin opens db (a SQLite file, a postgres:// URL or a redis://
// server) for the operators' commands; readOnly for those that only read,
// which on SQLite open beside a running idem serve.
func openAdmin(ctx context.Context, cmd, db string, readOnly bool) (*adminStore, error) {
	if isRedis(db) {
		s, err := openRedis(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("%s: open %s: %w", cmd, redact(db), err)
		}
		// One server or a Sentinel master; on a Redis Cluster the
		// store's calls answer why not (docs/REDIS.md, "Operators").
		return &adminStore{admin: s, insp: s, close: s.Close}, nil
	}
	b, err := openBackend(ctx, db, backendOptions{existing: true, readOnly: readOnly,
		lockedHint: "a running idem serve holds the SQLite file: stop it, or use its console (idem serve -admin)"})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	a, ok := b.store.(idem.Admin)
	in, ok2 := b.store.(idem.Inspector)
	if !ok || !ok2 {
		b.close()
		return nil, fmt.Errorf("%s: this store (%T) does not implement idem.Admin", cmd, b.store)
	}
	return &adminStore{admin: a, insp: in, close: b.close}, nil
}

// actorName is who the audit names: the --actor given, else the OS user.
func actorName(actor string) string {
	if actor != "" {
		return actor
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "unknown"
}

// find looks a record up by the scope an operator gave: as the Guard
// stores it (a long or binary scope as its digest), then as given (a
// digest copied from a listing).
func find(ctx context.Context, in idem.Inspector, scope, key string) (*idem.Record, error) {
	rec, err := in.Lookup(ctx, &idem.LookupParams{Scope: idem.StoredScope(scope), Key: key})
	if errors.Is(err, idem.ErrNotFound) && idem.StoredScope(scope) != scope {
		rec, err = in.Lookup(ctx, &idem.LookupParams{Scope: scope, Key: key})
	}
	if errors.Is(err, idem.ErrNotFound) {
		return nil, fmt.Errorf("no record for scope %q and key %q: %w", scope, key, idem.ErrNotFound)
	}
	return rec, err
}

// change is one forget or resolve an operator asked for.
type change struct {
	scope, key    string
	actor, reason string
	force         bool         // forget: a pending record whose lease ended too
	abandon       bool         // resolve: give up the intent (abandonedResult)
	answer        *idem.Result // resolve: the answer retries get
	token         int64        // the token the operator saw; 0 to take the current one
	defaultTTL    time.Duration
}

// forget runs Admin.Forget for c, fenced on the token of the record it
// finds (or c.token), and returns the record forgotten.
func forget(ctx context.Context, s *adminStore, c change, now time.Time) (*idem.Record, error) {
	rec, err := find(ctx, s.insp, c.scope, c.key)
	if err != nil {
		return nil, err
	}
	token := c.token
	if token == 0 {
		token = rec.Token
	}
	p := &idem.ForgetParams{Scope: rec.Scope, Key: rec.Key, Force: c.force, Token: token, Now: now,
		Audit: idem.AuditEntry{At: now, Actor: c.actor, Action: idem.AuditForget, Reason: c.reason}}
	if s.guard != nil {
		return s.guard.Forget(ctx, p)
	}
	return s.admin.Forget(ctx, p)
}

// resolve runs Admin.Resolve for c as forget runs Forget. The answer is
// kept as long as the record was claimed for (its TTL), or c.defaultTTL.
func resolve(ctx context.Context, s *adminStore, c change, now time.Time) (*idem.Record, idem.Result, error) {
	rec, err := find(ctx, s.insp, c.scope, c.key)
	if err != nil {
		return nil, idem.Result{}, err
	}
	token := c.token
	if token == 0 {
		token = rec.Token
	}
	res, action := idem.Result{}, idem.AuditResolve
	switch {
	case c.abandon:
		res, action = abandonedResult(), idem.AuditAbandon
	case c.answer != nil:
		res = *c.answer
	}
	ttl := rec.TTL
	if ttl <= 0 {
		ttl = c.defaultTTL
	}
	if ttl <= 0 {
		ttl = idem.DefaultTTL
	}
	before, err := s.admin.Resolve(ctx, &idem.ResolveParams{Scope: rec.Scope, Key: rec.Key, Result: res, ExpiresAt: now.Add(ttl),
		Token: token, Now: now, Audit: idem.AuditEntry{At: now, Actor: c.actor, Action: action, Reason: c.reason}})
	return before, res, err
}

// abandonedResult is the answer retries of an abandoned intent get: 410
// Gone, a problem saying an operator gave it up.
func abandonedResult() idem.Result {
	body, _ := json.Marshal(map[string]any{
		"type": transfers.ProblemBase + "abandoned", "title": "Abandoned", "status": 410,
		"detail": "an operator gave this request up; it will not be carried out",
	})
	return idem.Result{Status: 410, Header: map[string][]string{"Content-Type": {"application/problem+json"}}, Body: append(body, '\n')}
}

// answerResult is the answer of resolve --answer: status and body, JSON
// when the body is JSON.
func answerResult(status int, body []byte) idem.Result {
	ct := "text/plain; charset=utf-8"
	if json.Valid(body) {
		ct = "application/json"
	}
	return idem.Result{Status: status, Header: map[string][]string{"Content-Type": {ct}}, Body: body}
}

// refusalHint explains an Admin refusal to an operator.
func refusalHint(err error) error {
	switch {
	case errors.Is(err, idem.ErrLeaseLive):
		return fmt.Errorf("%w: its holder may be running the work right now; wait for the lease to end (idem pending shows it) and try again", err)
	case errors.Is(err, idem.ErrPending):
		return fmt.Errorf("%w: its work may have had effects; reconcile them first, then resolve it (idem resolve) or give --force to delete it so the next request runs it again", err)
	case errors.Is(err, idem.ErrNotPending):
		return fmt.Errorf("%w: it has its answer already; forget it first to change it", err)
	case errors.Is(err, idem.ErrFenced):
		return fmt.Errorf("%w: the record was claimed again since it was read; look at it again", err)
	}
	return err
}

// recordState is the state an operator sees: completed, expired or
// pending.
func recordState(r *idem.Record, now time.Time) string {
	if r.State == idem.StateCompleted && r.Expired(now) {
		return string(idem.ListExpired)
	}
	return string(r.State)
}

// recordJSON is a record in the --json output of keys and pending.
type recordJSON struct {
	Scope       string     `json:"scope"`
	Key         string     `json:"key"`
	State       string     `json:"state"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	LeaseUntil  *time.Time `json:"lease_until,omitempty"`
	Status      int        `json:"status"`
	Kind        string     `json:"kind,omitempty"`
	Attempts    int        `json:"attempts"`
	Token       int64      `json:"token,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	Stuck       *bool      `json:"stuck,omitempty"`
	Steps       []stepJSON `json:"steps,omitempty"`
	Fingerprint string     `json:"fingerprint"`
}

type stepJSON struct {
	Name   string `json:"name"`
	Output string `json:"output"`
}

func toJSON(r *idem.Record, now time.Time) recordJSON {
	j := recordJSON{Scope: r.Scope, Key: r.Key, State: recordState(r, now), CreatedAt: r.CreatedAt.UTC(), Status: r.Result.Status,
		Kind: r.Kind, Attempts: r.Attempts, Token: r.Token, LastError: r.LastError, Fingerprint: r.Fingerprint}
	if r.State == idem.StatePending {
		lu := r.LeaseUntil.UTC()
		j.LeaseUntil = &lu
	} else {
		ex := r.ExpiresAt.UTC()
		j.ExpiresAt = &ex
	}
	return j
}

// auditJSON is an audit entry in the --json output of keys --audit.
type auditJSON struct {
	ID     int64       `json:"id"`
	At     time.Time   `json:"at"`
	Actor  string      `json:"actor"`
	Action string      `json:"action"`
	Reason string      `json:"reason"`
	Scope  string      `json:"scope"`
	Key    string      `json:"key"`
	Status int         `json:"status,omitempty"`
	Before *recordJSON `json:"before,omitempty"`
}

func auditToJSON(e *idem.AuditEntry) auditJSON {
	j := auditJSON{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Reason: e.Reason, Scope: e.Scope, Key: e.Key, Status: e.Status}
	if e.Before != nil {
		b := toJSON(e.Before, e.At)
		j.Before = &b
	}
	return j
}

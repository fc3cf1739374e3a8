package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

var (
	_ idem.LeasedStore   = (*Store)(nil)
	_ idem.LeasedTxStore = (*Store)(nil)
)

// Leased mode (see docs/SQLITE.md, "Leased mode"). A pending record is a
// row of idem_records with state 'pending', expires_at at
// idem.PendingExpiresAt (so that Begin, Commit's upsert and DeleteExpired
// treat it as live) and the leased columns set; its recovery points are
// rows of idem_steps. Every write takes the writer slot and runs in one
// BEGIN IMMEDIATE transaction (see write.go), so a check and the write it
// guards are atomic: no other writer of the file runs in between.

const (
	// fenceWhere selects the record a lease holds: pending, with its
	// token. Its arguments are scope, key and token.
	fenceWhere = ` WHERE scope = ? AND key = ? AND state = 'pending' AND token = ?`

	insertPending = `INSERT INTO idem_records (scope, key, ` + recordColumns + `, ` + leasedColumns + `)
		VALUES (?, ?, ?, 'pending', 0, NULL, X'', ?, ?, ?, ?, ?, ?, 1, '', ?)
		ON CONFLICT (scope, key) DO UPDATE SET
		  fingerprint = excluded.fingerprint, state = excluded.state,
		  status = excluded.status, header = excluded.header, body = excluded.body,
		  created_at = excluded.created_at, expires_at = excluded.expires_at,
		  token = excluded.token, lease_until = excluded.lease_until, kind = excluded.kind,
		  input = excluded.input, attempts = excluded.attempts, last_error = excluded.last_error,
		  ttl = excluded.ttl`
	takeOver = `UPDATE idem_records SET token = token + 1, attempts = attempts + 1, lease_until = ?
		WHERE scope = ? AND key = ?`
	selectSteps = `SELECT name, output FROM idem_steps WHERE scope = ? AND key = ? ORDER BY seq`
	deleteSteps = `DELETE FROM idem_steps WHERE scope = ? AND key = ?`
	checkFence  = `SELECT 1 FROM idem_records` + fenceWhere
	upsertStep  = `INSERT INTO idem_steps (scope, key, name, seq, output, created_at)
		VALUES (?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM idem_steps WHERE scope = ? AND key = ?), ?, ?)
		ON CONFLICT (scope, key, name) DO UPDATE SET output = excluded.output`
	heartbeat = `UPDATE idem_records SET lease_until = ?` + fenceWhere
	complete  = `UPDATE idem_records SET state = 'completed', status = ?, header = ?, body = ?,
		expires_at = ?, last_error = ''` + fenceWhere
	release         = `UPDATE idem_records SET lease_until = ?, last_error = ?` + fenceWhere
	selectAbandoned = `SELECT ` + recordColumns + `, ` + leasedColumns + `, scope, key FROM idem_records
		WHERE state = 'pending' AND lease_until <= ? ORDER BY lease_until LIMIT ?`
)

// unavailable wraps a failure of the database so that it matches
// idem.ErrUnavailable; ErrFenced and errors that match already pass as
// they are.
func unavailable(op string, err error) error {
	if errors.Is(err, idem.ErrFenced) || errors.Is(err, idem.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: sqlitestore: %s: %w", idem.ErrUnavailable, op, err)
}

// leasedQueries are prepared once by Open (see Store.prepare).
var leasedQueries = []string{
	insertPending, takeOver, selectSteps, deleteSteps, checkFence, upsertStep,
	heartbeat, complete, release, selectAbandoned,
}

// txStmt returns the prepared statement of query (one of leasedQueries)
// in tx.
func (s *Store) txStmt(ctx context.Context, tx *sql.Tx, query string) *sql.Stmt {
	return tx.StmtContext(ctx, s.stmts[query])
}

// leasedWrite runs fn in one write transaction (see write.go) and commits
// it; an error from fn rolls it back and is returned (wrapped, unless it is
// ErrFenced, to match idem.ErrUnavailable).
func (s *Store) leasedWrite(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if s.file == nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, ErrReadOnly)
	}
	conn, tx, err := s.beginWrite(ctx, op, false)
	if err != nil {
		return unavailable(op, err)
	}
	if err := fn(tx); err != nil {
		_ = s.endWrite(conn, tx)
		return unavailable(op, err)
	}
	if err := s.commitWrite(ctx, conn, tx); err != nil {
		return unavailable(op, err)
	}
	return nil
}

// fencedUpdate runs update, whose WHERE clause ends with fenceWhere, and
// returns ErrFenced if it changed no row.
func (s *Store) fencedUpdate(ctx context.Context, tx *sql.Tx, l idem.Lease, update string, args ...any) error {
	res, err := s.txStmt(ctx, tx, update).ExecContext(ctx, append(args, l.Scope, l.Key, l.Token)...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return idem.ErrFenced
	}
	return nil
}

// fence returns ErrFenced unless the record l names is pending with l's
// token.
func (s *Store) fence(ctx context.Context, tx *sql.Tx, l idem.Lease) error {
	var one int
	err := s.txStmt(ctx, tx, checkFence).QueryRowContext(ctx, l.Scope, l.Key, l.Token).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return idem.ErrFenced
	}
	return err
}

// claimable reports whether a claim at now with fingerprint may take rec
// (nil when there is none): rec is missing or a completed record that has
// expired (a new record), or a pending record whose lease has ended with
// the same fingerprint (a takeover).
func claimable(rec *idem.Record, fingerprint string, now time.Time) (fresh, takeover bool) {
	switch {
	case rec == nil || rec.Expired(now): // a pending record never expires
		return true, false
	case rec.State == idem.StatePending && now.Compare(rec.LeaseUntil) >= 0 && rec.Fingerprint == fingerprint:
		return false, true
	}
	return false, false
}

// Claim implements idem.LeasedStore.
//
// A record that cannot be claimed (live and completed, or pending under a
// live lease or with another fingerprint) is answered from a plain read,
// without the writer: a replay or an in-flight answer costs one read.
// Otherwise the record is read again and claimed in one IMMEDIATE
// transaction, which decides: of two concurrent claims, the second sees
// the first's record. While a local step of the key is open (BeginStep),
// a claim waits for it to end, at most Config.BusyTimeout.
func (s *Store) Claim(ctx context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	if p.Lease <= 0 {
		return nil, fmt.Errorf("sqlitestore: Claim: lease must be positive, got %s", p.Lease)
	}
	rec, err := lookup(ctx, s.read, p.Scope, p.Key)
	switch {
	case errors.Is(err, idem.ErrNotFound):
		rec = nil
	case err != nil:
		return nil, unavailable("claim", err)
	}
	if fresh, takeover := claimable(rec, p.Fingerprint, p.Now); !fresh && !takeover {
		return &idem.Claim{Record: rec}, nil
	}
	var claim *idem.Claim
	err = s.leasedWrite(ctx, "claim", func(tx *sql.Tx) error {
		var err error
		claim, err = s.claimTx(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return claim, nil
}

// claimTx reads and claims the record in tx (see LeasedStore.Claim and
// memstore's reference implementation).
func (s *Store) claimTx(ctx context.Context, tx *sql.Tx, p *idem.ClaimParams) (*idem.Claim, error) {
	old, err := lookup(ctx, tx.StmtContext(ctx, s.read), p.Scope, p.Key)
	switch {
	case errors.Is(err, idem.ErrNotFound):
		old = nil
	case err != nil:
		return nil, err
	}
	leaseUntil := p.Now.Add(p.Lease)
	fresh, takeover := claimable(old, p.Fingerprint, p.Now)
	switch {
	case fresh:
		token := p.Now.UnixMicro()
		if old != nil && old.Token >= token {
			token = old.Token + 1
		}
		var input []byte
		if p.Input != nil {
			input = append([]byte{}, p.Input...)
		}
		if _, err := s.txStmt(ctx, tx, insertPending).ExecContext(ctx, p.Scope, p.Key, p.Fingerprint,
			p.Now.UnixNano(), idem.PendingExpiresAt.UnixNano(),
			token, leaseUntil.UnixNano(), p.Kind, input, int64(p.TTL)); err != nil {
			return nil, err
		}
		if _, err := s.txStmt(ctx, tx, deleteSteps).ExecContext(ctx, p.Scope, p.Key); err != nil {
			return nil, err
		}
		rec := &idem.Record{
			Scope: p.Scope, Key: p.Key, Fingerprint: p.Fingerprint,
			State: idem.StatePending, Result: idem.Result{Body: []byte{}},
			CreatedAt: time.Unix(0, p.Now.UnixNano()).UTC(), ExpiresAt: idem.PendingExpiresAt,
			Token: token, LeaseUntil: time.Unix(0, leaseUntil.UnixNano()).UTC(),
			Kind: p.Kind, Input: input, TTL: p.TTL, Attempts: 1,
		}
		return &idem.Claim{Record: rec, Claimed: true, Lease: leaseOf(rec)}, nil
	case takeover:
		if _, err := s.txStmt(ctx, tx, takeOver).ExecContext(ctx, leaseUntil.UnixNano(), p.Scope, p.Key); err != nil {
			return nil, err
		}
		old.Token++
		old.Attempts++
		old.LeaseUntil = time.Unix(0, leaseUntil.UnixNano()).UTC()
		steps, err := s.readSteps(ctx, tx, p.Scope, p.Key)
		if err != nil {
			return nil, err
		}
		return &idem.Claim{Record: old, Claimed: true, Lease: leaseOf(old), Steps: steps}, nil
	default:
		return &idem.Claim{Record: old}, nil
	}
}

func leaseOf(r *idem.Record) idem.Lease {
	return idem.Lease{Scope: r.Scope, Key: r.Key, Token: r.Token}
}

// readSteps returns the recovery points of (scope, key) in the order they
// were first saved.
func (s *Store) readSteps(ctx context.Context, tx *sql.Tx, scope, key string) ([]idem.Step, error) {
	rows, err := s.txStmt(ctx, tx, selectSteps).QueryContext(ctx, scope, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var steps []idem.Step
	for rows.Next() {
		var st idem.Step
		if err := rows.Scan(&st.Name, &st.Output); err != nil {
			return nil, err
		}
		steps = append(steps, st)
	}
	return steps, rows.Err()
}

// saveStep writes step name's recovery point; saving a name again replaces
// its output and keeps its place in the order.
func (s *Store) saveStep(ctx context.Context, tx *sql.Tx, l idem.Lease, name string, output []byte, now time.Time) error {
	_, err := s.txStmt(ctx, tx, upsertStep).ExecContext(ctx, l.Scope, l.Key, name, l.Scope, l.Key, output, now.UnixNano())
	return err
}

// Heartbeat implements idem.LeasedStore.
func (s *Store) Heartbeat(ctx context.Context, p *idem.HeartbeatParams) error {
	return s.leasedWrite(ctx, "heartbeat", func(tx *sql.Tx) error {
		return s.fencedUpdate(ctx, tx, p.Lease, heartbeat, p.Now.Add(p.Duration).UnixNano())
	})
}

// SaveStep implements idem.LeasedStore: the fence check and the step's
// upsert are one transaction.
func (s *Store) SaveStep(ctx context.Context, p *idem.SaveStepParams) error {
	return s.leasedWrite(ctx, "save step", func(tx *sql.Tx) error {
		if err := s.fence(ctx, tx, p.Lease); err != nil {
			return err
		}
		return s.saveStep(ctx, tx, p.Lease, p.Name, p.Output, p.Now)
	})
}

// Complete implements idem.LeasedStore. It deletes the record's steps.
func (s *Store) Complete(ctx context.Context, p *idem.CompleteParams) error {
	header, err := encodeHeader(p.Result.Header)
	if err != nil {
		return err
	}
	body := p.Result.Body
	if body == nil {
		body = []byte{}
	}
	return s.leasedWrite(ctx, "complete", func(tx *sql.Tx) error {
		if err := s.fencedUpdate(ctx, tx, p.Lease, complete, p.Result.Status, header, body, p.ExpiresAt.UnixNano()); err != nil {
			return err
		}
		_, err := s.txStmt(ctx, tx, deleteSteps).ExecContext(ctx, p.Lease.Scope, p.Lease.Key)
		return err
	})
}

// Release implements idem.LeasedStore.
func (s *Store) Release(ctx context.Context, p *idem.ReleaseParams) error {
	return s.leasedWrite(ctx, "release", func(tx *sql.Tx) error {
		return s.fencedUpdate(ctx, tx, p.Lease, release, p.RetryAt.UnixNano(), p.Error)
	})
}

// Abandoned implements idem.LeasedStore. It is a read (through the partial
// index on lease_until of pending records), so it works on a store opened
// with Config.ReadOnly too.
func (s *Store) Abandoned(ctx context.Context, p *idem.AbandonedParams) ([]*idem.Record, error) {
	if p.Limit <= 0 {
		return []*idem.Record{}, nil
	}
	rows, err := s.stmts[selectAbandoned].QueryContext(ctx, p.Now.UnixNano(), p.Limit)
	if err != nil {
		return nil, unavailable("abandoned", err)
	}
	defer rows.Close()
	var out []*idem.Record
	for rows.Next() {
		var scope, key string
		rec, err := scanRecord(rows, "", "", &scope, &key)
		if err != nil {
			return nil, unavailable("abandoned", err)
		}
		rec.Scope, rec.Key = scope, key
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("abandoned", err)
	}
	return out, nil
}

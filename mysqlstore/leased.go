package mysqlstore

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

// claimTries bounds the rounds of Claim: a round is retried only when its
// INSERT lost to another claim of a key that had no record, or a deadlock
// chose it.
const claimTries = 3

// errClaimAgain makes Claim try another round.
var errClaimAgain = errors.New("claim again")

// Claim implements idem.LeasedStore. In one READ COMMITTED transaction it
// locks the key's record (SELECT … FOR UPDATE), decides from it, and writes:
// a new pending record where there is none or the completed one has
// expired (Attempts 1, token the larger of p.Now in microseconds and the
// old token + 1, so that tokens never repeat, even after the sweeper
// deleted the old record; the key's old steps are deleted), or a takeover
// of a pending record whose lease has ended and whose fingerprint is
// p.Fingerprint (token + 1, Attempts + 1, its kind, input and TTL kept).
// Of two concurrent claims, the row lock (or, without a row, the primary
// key) lets exactly one write. A takeover reads the steps after its lock,
// so it sees every step its predecessor committed. A claim of a key whose
// holder is in a local step, which holds the record's row, waits for the
// step to end.
func (s *Store) Claim(ctx context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	if p.Lease <= 0 {
		return nil, fmt.Errorf("mysqlstore: Claim: lease must be positive, got %s", p.Lease)
	}
	var err error
	for range claimTries {
		var c *idem.Claim
		c, err = s.claimOnce(ctx, p)
		if errors.Is(err, errClaimAgain) {
			continue
		}
		if err != nil {
			return nil, unavailable("claim", err)
		}
		return c, nil
	}
	// The driver's message of a duplicate quotes the key: only its number
	// goes into the error.
	n, _ := errNumber(err)
	return nil, unavailable("claim", fmt.Errorf("%s lost %d rounds in a row (last: MySQL error %d)", recordName(p.Scope, p.Key), claimTries, n))
}

func (s *Store) claimOnce(ctx context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	cur, err := s.selectRecord(ctx, tx, p.Scope, p.Key, " FOR UPDATE")
	if err != nil {
		return nil, retryable(err)
	}
	now := micros(p.Now)
	leaseUntil := intLit(micros(p.Now.Add(p.Lease)))
	var write string
	fresh := true
	switch {
	case cur == nil:
		write = "INSERT INTO " + s.names.table + " (scope, `key`, " + recordColumns + ") VALUES (" +
			hexLit(p.Scope) + ", " + hexLit(p.Key) + ", " + hexLit(p.Fingerprint) + ", 'pending', 0, NULL, '', " +
			intLit(now) + ", " + intLit(micros(idem.PendingExpiresAt)) + ", " + intLit(max(now, 1)) + ", " + leaseUntil + ", " +
			hexLit(p.Kind) + ", " + nullLit(p.Input) + ", 1, '', " + intLit(p.TTL.Microseconds()) + ")"
	case cur.State != idem.StatePending && micros(cur.ExpiresAt) <= now:
		write = "UPDATE " + s.names.table + " SET fingerprint = " + hexLit(p.Fingerprint) + ", state = 'pending', status = 0, headers = NULL, body = '', " +
			"created_at = " + intLit(now) + ", expires_at = " + intLit(micros(idem.PendingExpiresAt)) + ", token = " + intLit(max(now, cur.Token+1)) +
			", lease_until = " + leaseUntil + ", kind = " + hexLit(p.Kind) + ", input = " + nullLit(p.Input) + ", attempts = 1, last_error = '', ttl_us = " +
			intLit(p.TTL.Microseconds()) + " WHERE " + keyIs(p.Scope, p.Key)
	case cur.State == idem.StatePending && micros(cur.LeaseUntil) <= now && cur.Fingerprint == p.Fingerprint:
		fresh = false
		write = "UPDATE " + s.names.table + " SET token = token + 1, attempts = attempts + 1, lease_until = " + leaseUntil +
			" WHERE " + keyIs(p.Scope, p.Key)
	default:
		// Not claimable: the record that refused the claim is the answer.
		return &idem.Claim{Record: cur}, tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, write); err != nil {
		return nil, retryable(err)
	}
	var steps []idem.Step
	if fresh {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+s.names.steps+" WHERE "+keyIs(p.Scope, p.Key)); err != nil {
			return nil, retryable(err)
		}
	} else if steps, err = s.steps(ctx, tx, p.Scope, p.Key); err != nil {
		return nil, err
	}
	rec, err := s.selectRecord(ctx, tx, p.Scope, p.Key, "")
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("the record of %s vanished in its own transaction", recordName(p.Scope, p.Key))
	}
	if err := tx.Commit(); err != nil {
		return nil, retryable(err)
	}
	return &idem.Claim{Record: rec, Claimed: true, Lease: leaseOf(rec), Steps: steps}, nil
}

// retryable turns the errors a claim round may meet under concurrency (its
// INSERT lost the key to another claim, a deadlock) into errClaimAgain.
func retryable(err error) error {
	if isErr(err, errDupEntry) || isErr(err, errLockDeadlock) || isErr(err, errCertification) {
		return fmt.Errorf("%w: %w", errClaimAgain, err)
	}
	return err
}

// steps reads the steps of (scope, key) in the order they were first saved.
func (s *Store) steps(ctx context.Context, tx *sql.Tx, scope, key string) ([]idem.Step, error) {
	rows, err := tx.QueryContext(ctx, "SELECT name, output FROM "+s.names.steps+" WHERE "+keyIs(scope, key)+" ORDER BY seq")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []idem.Step
	for rows.Next() {
		var name, output []byte
		if err := rows.Scan(&name, &output); err != nil {
			return nil, err
		}
		out = append(out, idem.Step{Name: string(name), Output: output})
	}
	return out, rows.Err()
}

func leaseOf(r *idem.Record) idem.Lease {
	return idem.Lease{Scope: r.Scope, Key: r.Key, Token: r.Token}
}

// fence is the condition of every write of a lease holder: the record of
// l's key is pending and its token is still l's.
func fence(l idem.Lease) string {
	return keyIs(l.Scope, l.Key) + " AND state = 'pending' AND token = " + intLit(l.Token)
}

// fenced is the error of a write whose lease is not current.
func fenced(op string, l idem.Lease) error {
	return fmt.Errorf("mysqlstore: %s %s with token %d: %w", op, recordName(l.Scope, l.Key), l.Token, idem.ErrFenced)
}

// fencedUpdate runs UPDATE … SET set WHERE fence(l). MySQL counts the rows
// an UPDATE changed, not those it matched (unless the DSN asks for
// clientFoundRows): an UPDATE that wrote the values a row already had
// affects none, so no row affected is checked again against the fence.
func (s *Store) fencedUpdate(ctx context.Context, op, set string, l idem.Lease) error {
	res, err := s.db.ExecContext(ctx, "UPDATE "+s.names.table+" SET "+set+" WHERE "+fence(l))
	if err != nil {
		return unavailable(op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return unavailable(op, err)
	} else if n > 0 {
		return nil
	}
	var one int
	err = s.db.QueryRowContext(ctx, "SELECT 1 FROM "+s.names.table+" WHERE "+fence(l)).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fenced(op, l)
	case err != nil:
		return unavailable(op, err)
	}
	return nil
}

// Heartbeat implements idem.LeasedStore: one UPDATE, fenced. It waits for
// a local step of the same holder in progress, which holds the record's
// row lock, to end.
func (s *Store) Heartbeat(ctx context.Context, p *idem.HeartbeatParams) error {
	return s.fencedUpdate(ctx, "heartbeat", "lease_until = "+intLit(micros(p.Now.Add(p.Duration))), p.Lease)
}

// Release implements idem.LeasedStore: one UPDATE, fenced.
func (s *Store) Release(ctx context.Context, p *idem.ReleaseParams) error {
	return s.fencedUpdate(ctx, "release", "lease_until = "+intLit(micros(p.RetryAt))+", last_error = "+hexLit(p.Error), p.Lease)
}

// SaveStep implements idem.LeasedStore: in one transaction, the record's
// row locked, fenced (so that no claim takes it over before the step
// commits), and the step upserted. A saved name gets its new output and
// keeps its place.
func (s *Store) SaveStep(ctx context.Context, p *idem.SaveStepParams) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return unavailable("save step", err)
	}
	defer func() { _ = tx.Rollback() }()
	var one int
	err = tx.QueryRowContext(ctx, "SELECT 1 FROM "+s.names.table+" WHERE "+fence(p.Lease)+" FOR UPDATE").Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fenced("save step", p.Lease)
	case err != nil:
		return unavailable("save step", err)
	}
	if _, err := tx.ExecContext(ctx, s.upsertStep(p.Lease.Scope, p.Lease.Key, p.Name, p.Output, p.Now)); err != nil {
		return unavailable("save step", err)
	}
	return unavailable("save step", tx.Commit())
}

func (s *Store) upsertStep(scope, key, name string, output []byte, now time.Time) string {
	return "INSERT INTO " + s.names.steps + " (scope, `key`, name, output, created_at) VALUES (" +
		hexLit(scope) + ", " + hexLit(key) + ", " + hexLit(name) + ", " + nullLit(output) + ", " + intLit(micros(now)) +
		") ON DUPLICATE KEY UPDATE output = " + nullLit(output)
}

// Complete implements idem.LeasedStore: the fenced UPDATE that completes
// the record, then the DELETE of its steps, which deletes nothing unless
// the record is completed with the lease's token. Steps left by a crash
// in between go with the key's next new record.
func (s *Store) Complete(ctx context.Context, p *idem.CompleteParams) error {
	headers, err := headersLit(p.Result.Header)
	if err != nil {
		return fmt.Errorf("mysqlstore: complete: %w", err)
	}
	body := p.Result.Body
	if body == nil {
		body = []byte{}
	}
	res, err := s.db.ExecContext(ctx, "UPDATE "+s.names.table+" SET state = 'completed', status = "+intLit(int64(p.Result.Status))+
		", headers = "+headers+", body = "+hexLit(body)+", expires_at = "+intLit(micros(p.ExpiresAt))+", last_error = '' WHERE "+fence(p.Lease))
	if err != nil {
		return unavailable("complete", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return unavailable("complete", err)
	} else if n == 0 {
		return fenced("complete", p.Lease)
	}
	l := p.Lease
	if _, err := s.db.ExecContext(ctx, "DELETE FROM "+s.names.steps+" WHERE "+keyIs(l.Scope, l.Key)+
		" AND EXISTS (SELECT 1 FROM "+s.names.table+" WHERE "+keyIs(l.Scope, l.Key)+" AND state = 'completed' AND token = "+intLit(l.Token)+")"); err != nil {
		return unavailable("complete: delete steps", err)
	}
	return nil
}

// Abandoned implements idem.LeasedStore: one SELECT through the index on
// (state, lease_until).
func (s *Store) Abandoned(ctx context.Context, p *idem.AbandonedParams) ([]*idem.Record, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT scope, `key`, "+recordColumns+" FROM "+s.names.table+
		" WHERE state = 'pending' AND lease_until <= "+intLit(micros(p.Now))+" ORDER BY lease_until LIMIT "+intLit(int64(p.Limit)))
	if err != nil {
		return nil, unavailable("abandoned", err)
	}
	defer rows.Close()
	var out []*idem.Record
	for rows.Next() {
		var scope, key []byte
		var nr nullRecord
		if err := rows.Scan(append([]any{&scope, &key}, nr.dest()...)...); err != nil {
			return nil, unavailable("abandoned", err)
		}
		rec, err := nr.record(string(scope), string(key))
		if err != nil {
			return nil, unavailable("abandoned", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("abandoned", err)
	}
	return out, nil
}

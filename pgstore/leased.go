package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	_ idem.LeasedStore   = (*Store)(nil)
	_ idem.LeasedTxStore = (*Store)(nil)
)

// claimTries bounds the rounds of Claim: a round finds no record only if
// the one its claim conflicted with was deleted in between, which only the
// sweeper does, to a record that expired meanwhile.
const claimTries = 3

// Claim implements idem.LeasedStore. It pipelines, in one round trip and
// one implicit transaction, the claim (an INSERT … ON CONFLICT DO UPDATE
// that writes only when the key may be claimed), the read of the key's
// steps and the read of its record, each statement with a snapshot of its
// own taken after the claim: a takeover sees every step its predecessor
// committed, and a claim refused reads the record that refused it (see
// docs/POSTGRES.md, "Leased mode"). A claim of a key whose holder is in a
// local step, which holds the record's row, waits for the step to end.
func (s *Store) Claim(ctx context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	if p.Lease <= 0 {
		return nil, fmt.Errorf("pgstore: Claim: lease must be positive, got %s", p.Lease)
	}
	for range claimTries {
		var (
			claimed, current *idem.Record
			steps            []idem.Step
		)
		b := &pgx.Batch{}
		b.Queue(s.leased.Claim, p.Scope, p.Key, p.Fingerprint, p.Kind, p.Input, p.Now, p.Now.Add(p.Lease), p.Now.UnixMicro(), p.TTL.Microseconds()).
			QueryRow(func(row pgx.Row) (err error) {
				claimed, err = pgschema.ScanLeased(row)
				return err
			})
		b.Queue(s.leased.Steps, p.Scope, p.Key).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var st idem.Step
				if err := rows.Scan(&st.Name, &st.Output); err != nil {
					return err
				}
				steps = append(steps, st)
			}
			return rows.Err()
		})
		b.Queue(s.leased.Select, p.Scope, p.Key).QueryRow(func(row pgx.Row) (err error) {
			current, err = pgschema.ScanLeased(row)
			return err
		})
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return nil, unavailable("claim", err)
		}
		switch {
		case claimed != nil:
			return &idem.Claim{Record: claimed, Claimed: true, Lease: leaseOf(claimed), Steps: steps}, nil
		case current != nil:
			return &idem.Claim{Record: current}, nil
		}
	}
	return nil, unavailable("claim", fmt.Errorf("the record of %s was deleted under %d claims in a row", recordName(p.Scope, p.Key), claimTries))
}

func leaseOf(r *idem.Record) idem.Lease {
	return idem.Lease{Scope: r.Scope, Key: r.Key, Token: r.Token}
}

// recordName names a record in an error by the digests of its scope and
// key (idem.KeyHash), which log lines may carry, never by the values.
func recordName(scope, key string) string {
	return pgschema.RecordName(scope, key)
}

// fenced is the error of a write whose lease is not current.
func fenced(op string, l idem.Lease) error {
	return fmt.Errorf("pgstore: %s %s with token %d: %w", op, recordName(l.Scope, l.Key), l.Token, idem.ErrFenced)
}

// fencedExec runs a fenced statement whose first three parameters are l's:
// no row affected is ErrFenced.
func (s *Store) fencedExec(ctx context.Context, op, sql string, l idem.Lease, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, append([]any{l.Scope, l.Key, l.Token}, args...)...)
	switch {
	case err != nil:
		return unavailable(op, err)
	case tag.RowsAffected() == 0:
		return fenced(op, l)
	}
	return nil
}

// Heartbeat implements idem.LeasedStore: one UPDATE, fenced. It waits for
// a local step of the same holder in progress, which holds the record's
// row lock, to end.
func (s *Store) Heartbeat(ctx context.Context, p *idem.HeartbeatParams) error {
	return s.fencedExec(ctx, "heartbeat", s.leased.Heartbeat, p.Lease, p.Now.Add(p.Duration))
}

// SaveStep implements idem.LeasedStore: one statement that locks the
// record's row, fenced, and upserts the step.
func (s *Store) SaveStep(ctx context.Context, p *idem.SaveStepParams) error {
	return s.fencedExec(ctx, "save step", s.leased.SaveStep, p.Lease, p.Name, p.Output, p.Now)
}

// Release implements idem.LeasedStore: one UPDATE, fenced.
func (s *Store) Release(ctx context.Context, p *idem.ReleaseParams) error {
	return s.fencedExec(ctx, "release", s.leased.Release, p.Lease, p.RetryAt, p.Error)
}

// Complete implements idem.LeasedStore. It pipelines, in one round trip
// and one implicit transaction, the fenced UPDATE that completes the
// record and the DELETE of its steps, which deletes nothing when the
// UPDATE was fenced.
func (s *Store) Complete(ctx context.Context, p *idem.CompleteParams) error {
	args, err := pgschema.CompleteArgs(p.Lease, p.Result, p.ExpiresAt)
	if err != nil {
		return fmt.Errorf("pgstore: complete: %w", err)
	}
	var tag pgconn.CommandTag
	b := &pgx.Batch{}
	b.Queue(s.leased.Complete, args...).Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	b.Queue(s.leased.DeleteSteps, p.Lease.Scope, p.Lease.Key, p.Lease.Token)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return unavailable("complete", err)
	}
	if tag.RowsAffected() == 0 {
		return fenced("complete", p.Lease)
	}
	return nil
}

// Abandoned implements idem.LeasedStore: one SELECT through the partial
// index on the lease_until of pending records.
func (s *Store) Abandoned(ctx context.Context, p *idem.AbandonedParams) ([]*idem.Record, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.leased.Abandoned, p.Now, p.Limit)
	if err != nil {
		return nil, unavailable("abandoned", err)
	}
	defer rows.Close()
	var out []*idem.Record
	for rows.Next() {
		rec, err := pgschema.ScanLeased(rows)
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

// BeginStep implements idem.LeasedTxStore. It pipelines BEGIN and a SELECT
// … FOR UPDATE of the record's row, fenced, in one round trip: while the
// step's transaction is open no claim can take the record over (a claim
// waits for the row). The step's Handle is a pgx.Tx, so TxFrom works in a
// local step as in atomic work.
func (s *Store) BeginStep(ctx context.Context, p *idem.BeginStepParams) (idem.StepTx, error) {
	lock, err := s.lockSQL(ctx)
	if err != nil {
		return nil, unavailable("begin step: connection check", err)
	}
	sql := s.leased.BeginStep
	if lock == s.sql.LockPlain {
		sql = s.leased.BeginStepPlain
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, unavailable("begin step: acquire", err)
	}
	t := &stepTx{store: s, conn: conn, lease: p.Lease, name: p.Name, now: p.Now}
	found := false
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	b.Queue(sql, p.Lease.Scope, p.Lease.Key, p.Lease.Token).QueryRow(func(row pgx.Row) error {
		err := row.Scan(new(string), &t.txStart)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	br := conn.Conn().SendBatch(ctx, b)
	ptx := br.Tx()
	if err := br.Close(); err != nil {
		endConn(ctx, conn)
		if pgschema.IsMissingSetting(err) {
			s.connCheck.Forget()
		}
		return nil, unavailable("begin step", err)
	}
	if !found {
		endConn(ctx, conn)
		return nil, fenced("begin step", p.Lease)
	}
	t.handle = &handle{tx: ptx, ended: &t.ended, owned: errStepOwned}
	return t, nil
}

package transfers

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultOrphanAfter is OrphanParams.After's default.
const DefaultOrphanAfter = 15 * time.Minute

// OrphanParams are the arguments of Service.FinishOrphans.
type OrphanParams struct {
	// Now is the time of the scan. Defaults to Config.Now().
	Now time.Time
	// After is how long a pending payout must have gone without an
	// execution taking it up before the scan takes it for an orphan. It
	// should outlast the longest wait of the completer between two
	// attempts of a live record (its backoff, at most 5 minutes, plus
	// its interval and a lease). Defaults to DefaultOrphanAfter.
	After time.Duration
	// Limit bounds the payouts one scan takes up. Defaults to 100.
	Limit int
}

// OrphanReport is what one scan found and did.
type OrphanReport struct {
	// Found counts the orphaned payouts the scan took up.
	Found int
	// Completed counts those it completed with the provider's charge.
	Completed int
	// Declined counts those the provider declined: credited back.
	Declined int
	// Failed counts those left pending (the provider's answer unknown,
	// or the ledger refused to complete them), each reported in an
	// ERROR log line as needing a human. The next scans try them again.
	Failed int
}

// FinishOrphans finishes the payouts the ledger holds as pending that no
// execution has taken up for p.After: their leased record was lost (Redis
// restarted without persistence, was flushed, failed over or evicted), so
// neither the completer nor a retry of the client will ever come back to
// them. Each is finished from what the ledger recorded, as its own steps
// would: it is charged with its charge's derived key (the provider
// answers with the charge the lost execution made, if it made one), then
// completed, or, only on a definitive decline, credited back. An unknown
// answer leaves it pending and debited, reported as needing a human (an
// ERROR log line), and taken up again by the scans after p.After.
//
// A payout whose record is in fact alive (a p.After shorter than the
// completer's waits) is finished just the same: every step finds the
// other's commit, and the charge is the same one under the same key.
// Payouts made before the ledger recorded their charge's key are left
// alone. It returns an error only when the ledger cannot be read.
func (s *Service) FinishOrphans(ctx context.Context, p *OrphanParams) (OrphanReport, error) {
	var rep OrphanReport
	if s.provider == nil {
		return rep, errors.New("transfers: FinishOrphans: payouts are not served (no Config.Provider)")
	}
	var o OrphanParams
	if p != nil {
		o = *p
	}
	if err := defaultIfZero(&o.After, DefaultOrphanAfter, "OrphanParams.After"); err != nil {
		return rep, err
	}
	if err := defaultIfZero(&o.Limit, 100, "OrphanParams.Limit"); err != nil {
		return rep, err
	}
	if o.Now.IsZero() {
		o.Now = s.cfg.Now()
	}
	now, bound := o.Now.UTC().UnixNano(), o.Now.Add(-o.After).UTC().UnixNano()
	orphans, err := s.orphans(ctx, bound, o.Limit)
	if err != nil {
		return rep, fmt.Errorf("transfers: find orphaned payouts: %w", err)
	}
	for _, op := range orphans {
		// Taken up, as an execution would: the next scans leave it for
		// After, and of two scans at once (two processes) one goes on.
		n, err := s.db.pool.exec(ctx, `UPDATE payouts SET seen_at = $1 WHERE id = $2 AND state = $3 AND seen_at < $4`,
			now, op.id, PayoutPending, bound)
		if err != nil {
			return rep, fmt.Errorf("transfers: take up orphaned payout %d: %w", op.id, err)
		}
		if n != 1 {
			continue
		}
		rep.Found++
		outcome, err := s.finishOrphan(ctx, op)
		age := time.Duration(now - op.created).Truncate(time.Second)
		attrs := []any{"payout", op.id, "account", op.account, "amount", op.amount, "reference", op.chargeKey, "age", age}
		switch {
		case err != nil:
			rep.Failed++
			s.cfg.Logger.ErrorContext(ctx, "transfers: an orphaned payout (its leased record was lost) stays pending and debited: it needs a human",
				append(attrs, "err", err)...)
		case outcome == PayoutCompleted:
			rep.Completed++
			s.cfg.Logger.WarnContext(ctx, "transfers: completed an orphaned payout (its leased record was lost)", attrs...)
		default:
			rep.Declined++
			s.cfg.Logger.WarnContext(ctx, "transfers: an orphaned payout (its leased record was lost) was declined and credited back", attrs...)
		}
	}
	return rep, nil
}

// orphan is a pending payout as the ledger recorded it.
type orphan struct {
	id, amount, created int64
	account, chargeKey  string
}

// orphans returns at most limit pending payouts with a charge key that no
// execution has taken up since bound, the longest untouched first.
func (s *Service) orphans(ctx context.Context, bound int64, limit int) ([]orphan, error) {
	rs, err := s.db.pool.query(ctx, `SELECT id, account, amount, created_at, charge_key FROM payouts
		WHERE state = $1 AND seen_at < $2 AND charge_key IS NOT NULL ORDER BY seen_at LIMIT $3`, PayoutPending, bound, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []orphan
	for rs.Next() {
		var o orphan
		if err := rs.Scan(&o.id, &o.account, &o.amount, &o.created, &o.chargeKey); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rs.Err()
}

// finishOrphan charges o with its charge's key and completes it, or
// credits it back on a definitive decline, and returns its new state. An
// unknown answer is an error matching errUnknownOutcome: nothing written.
func (s *Service) finishOrphan(ctx context.Context, o orphan) (string, error) {
	c, err := s.provider.charge(ctx, o.chargeKey, o.account, o.amount)
	if err != nil {
		return "", err
	}
	state := PayoutCompleted
	err = s.inLedgerTx(ctx, func(q querier) error {
		if c.Declined {
			state = PayoutDeclined
			return s.refund(ctx, q, o.id)
		}
		_, err := s.completePayout(ctx, q, o.id, c.ChargeID)
		return err
	})
	return state, err
}

// inLedgerTx runs fn in a transaction of the ledger, committed if fn
// succeeds and rolled back otherwise.
func (s *Service) inLedgerTx(ctx context.Context, fn func(q querier) error) (err error) {
	tx, err := s.db.begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.rollback(context.WithoutCancel(ctx))
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	return tx.commit(ctx)
}

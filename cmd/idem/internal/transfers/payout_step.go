package transfers

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/idemkit/idem"
)

// ledgerStep runs fn, a payout step that writes the ledger, once as the
// recovery point name of run, in a transaction of the ledger's database.
//
// When the leased records live in the ledger's database (the store is an
// idem.LeasedTxStore: SQLite, PostgreSQL), it is a local step: fn's writes
// and the step's record commit together, fenced, or not at all.
//
// Otherwise (Redis) the two cannot commit together: fn runs in a
// transaction of its own, which commits, and then the step is recorded
// (Run.Step). A crash, or a failed write to the store, between the two runs
// fn again on resumption, so every fn given here must find its own
// earlier commit and return the same output without writing twice (see
// debit, refund and completePayout, and docs/PAYOUTS.md, "On Redis").
func (s *Service) ledgerStep(ctx context.Context, run *idem.Run, name string, fn func(ctx context.Context, q querier) ([]byte, error)) ([]byte, error) {
	if s.localSteps {
		return run.LocalStep(ctx, name, func(ctx context.Context) ([]byte, error) {
			q, ok := s.db.current(ctx)
			if !ok {
				return nil, errors.New("the local step's context carries no transaction of the ledger's store")
			}
			return fn(ctx, q)
		})
	}
	return run.Step(ctx, name, func(ctx context.Context) (out []byte, err error) {
		tx, err := s.db.begin(ctx)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				_ = tx.rollback(context.WithoutCancel(ctx))
			}
		}()
		if out, err = fn(ctx, tx); err != nil {
			return nil, err
		}
		if err = tx.commit(ctx); err != nil {
			return nil, err
		}
		return out, nil
	})
}

// debitOpKey is the payout's op_key: what makes its debit happen once in
// the ledger whatever the executions. It is the debit's derived key and
// the time the record was first claimed, which every execution of the
// record shares (takeovers and the completer's included) and a new record
// for the same client key, once the old one has expired, does not: that
// one is a new payout, as it is when the step's record is the guard.
func debitOpKey(run *idem.Run) string {
	return run.DerivedKey(stepDebit) + "." + strconv.FormatInt(run.StartedAt.UnixMicro(), 10)
}

// migratePayoutOpKey adds payouts.op_key, and its unique index, to a
// ledger created before it existed (NULL for the payouts made until then,
// which NULLs never conflict with). Each change runs only when it is
// missing.
func (db *Database) migratePayoutOpKey(ctx context.Context) error {
	var hasCol, addCol, hasIndex string
	switch db.schema {
	case sqliteSchema:
		hasCol = `SELECT count(*) FROM pragma_table_info('payouts') WHERE name = 'op_key'`
		addCol = `ALTER TABLE payouts ADD COLUMN op_key TEXT`
		hasIndex = `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'payouts' AND name = 'payouts_op_key'`
	default:
		hasCol = `SELECT count(*) FROM pg_attribute WHERE attrelid = 'payouts'::regclass AND attname = 'op_key' AND NOT attisdropped`
		addCol = `ALTER TABLE payouts ADD COLUMN IF NOT EXISTS op_key text`
		hasIndex = `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'payouts'::regclass AND c.relname = 'payouts_op_key'`
	}
	var n int
	if err := db.pool.queryRow(ctx, hasCol).Scan(&n); err != nil {
		return fmt.Errorf("look for payouts.op_key: %w", err)
	}
	if n == 0 {
		if _, err := db.pool.exec(ctx, addCol); err != nil {
			return fmt.Errorf("add payouts.op_key: %w", err)
		}
	}
	if err := db.pool.queryRow(ctx, hasIndex).Scan(&n); err != nil {
		return fmt.Errorf("look for the index payouts_op_key: %w", err)
	}
	if n == 0 {
		if _, err := db.pool.exec(ctx, `CREATE UNIQUE INDEX IF NOT EXISTS payouts_op_key ON payouts (op_key)`); err != nil {
			return fmt.Errorf("create the index payouts_op_key: %w", err)
		}
	}
	return nil
}

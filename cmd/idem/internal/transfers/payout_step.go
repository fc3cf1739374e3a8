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
// the ledger whatever the executions. It is the debit's derived key, made
// of the intent only (scope, client key, step), so that an execution on a
// new record for the same key (Redis lost the old one) finds the payout
// too. A payout found under it is taken for an earlier one, whose record
// expired, only once it is older than Config.KeyTTL (see debit).
func debitOpKey(run *idem.Run) string { return run.DerivedKey(stepDebit) }

// legacyDebitOpKey is the op_key of the payouts made before debitOpKey
// was the intent's alone: the derived key and the record's creation time,
// which only the executions of that one record share.
func legacyDebitOpKey(run *idem.Run) string {
	return run.DerivedKey(stepDebit) + "." + strconv.FormatInt(run.StartedAt.UnixMicro(), 10)
}

// payoutColumns are the columns of payouts added to an existing ledger
// after its first schema, with their type on SQLite and on PostgreSQL:
// op_key (see debitOpKey), charge_key (the charge's derived key, which
// the orphan scan charges with) and seen_at (when an execution last took
// the payout up; see FinishOrphans). Payouts made before a column existed
// have it NULL.
var payoutColumns = []struct{ name, sqlite, postgres string }{
	{"op_key", "TEXT", "text"},
	{"charge_key", "TEXT", "text"},
	{"seen_at", "INTEGER", "bigint"},
}

// payoutIndexes are the indexes on payouts added with payoutColumns:
// op_key unique (two executions racing at the debit cannot both insert),
// and the pending payouts by seen_at, which the orphan scan reads.
var payoutIndexes = []struct{ name, def string }{
	{"payouts_op_key", `CREATE UNIQUE INDEX IF NOT EXISTS payouts_op_key ON payouts (op_key)`},
	{"payouts_pending", `CREATE INDEX IF NOT EXISTS payouts_pending ON payouts (seen_at) WHERE state = 'pending'`},
}

// migratePayoutOpKey adds payoutColumns and payoutIndexes to a ledger
// created before they existed. Each change runs only when it is missing,
// so that a restart does not queue for the table's lock.
func (db *Database) migratePayoutOpKey(ctx context.Context) error {
	for _, c := range payoutColumns {
		hasCol := `SELECT count(*) FROM pg_attribute WHERE attrelid = 'payouts'::regclass AND attname = $1 AND NOT attisdropped`
		addCol := `ALTER TABLE payouts ADD COLUMN IF NOT EXISTS ` + c.name + ` ` + c.postgres
		if db.schema == sqliteSchema {
			hasCol = `SELECT count(*) FROM pragma_table_info('payouts') WHERE name = $1`
			addCol = `ALTER TABLE payouts ADD COLUMN ` + c.name + ` ` + c.sqlite
		}
		var n int
		if err := db.pool.queryRow(ctx, hasCol, c.name).Scan(&n); err != nil {
			return fmt.Errorf("look for payouts.%s: %w", c.name, err)
		}
		if n == 0 {
			if _, err := db.pool.exec(ctx, addCol); err != nil {
				return fmt.Errorf("add payouts.%s: %w", c.name, err)
			}
		}
	}
	for _, ix := range payoutIndexes {
		hasIndex := `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'payouts'::regclass AND c.relname = $1`
		if db.schema == sqliteSchema {
			hasIndex = `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'payouts' AND name = $1`
		}
		var n int
		if err := db.pool.queryRow(ctx, hasIndex, ix.name).Scan(&n); err != nil {
			return fmt.Errorf("look for the index %s: %w", ix.name, err)
		}
		if n == 0 {
			if _, err := db.pool.exec(ctx, ix.def); err != nil {
				return fmt.Errorf("create the index %s: %w", ix.name, err)
			}
		}
	}
	return nil
}

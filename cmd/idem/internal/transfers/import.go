package transfers

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idem/batch"
)

// ImportScope is the scope of the keys of imported rows (batch.Key of the
// batch id and the row id). The service's HTTP scopes are "anonymous" and
// "bearer:<digest of the token>", and its consumer's "inbox/transfers": no client's key
// can stand for an imported row's.
const ImportScope = "import"

// ImportTransfer applies one row of an import as POST /transfers applies a
// transfer, through the transaction ctx carries (the one batch.Run opens
// for the row on the ledger's store), and records batchID and the row's id
// with the transfer. A row that can never succeed as it is (an unknown
// account, insufficient funds, a balance past the largest int64, or a
// transfer already in the ledger under this batch and row, which only a
// re-run after the row's record expired can meet) is refused with
// batch.Refuse before anything is written. Any other error is the
// database's: the row is rolled back and a re-run applies it.
//
// The row's fields must have passed ParseImport's checks.
func (s *Service) ImportTransfer(ctx context.Context, batchID string, row ImportRow) (Transfer, error) {
	q, ok := s.db.current(ctx)
	if !ok {
		return Transfer{}, errors.New("transfers: ImportTransfer runs inside batch.Run on the ledger's store: the context carries no transaction of it")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	// The ledger's own backstop: batch_id and row_id are unique, and a
	// row found there was applied by an earlier run.
	var id int64
	switch err := q.queryRow(ctx, `SELECT id FROM transfers WHERE batch_id = $1 AND row_id = $2`, batchID, row.ID).Scan(&id); {
	case err == nil:
		return Transfer{}, batch.Refuse(&declined{"already-applied", "Already applied",
			fmt.Sprintf("transfer %d already applied this row; its record had expired, and it is not applied again", id)})
	case !errors.Is(err, errNoRows):
		return Transfer{}, err
	}
	t, no, err := s.transfer(ctx, q, transferRequest{From: row.From, To: row.To, Amount: row.Amount}, origin{batchID: batchID, rowID: row.ID})
	switch {
	case err != nil:
		return Transfer{}, err
	case no != nil:
		return Transfer{}, batch.Refuse(no)
	}
	return t, nil
}

// migrateImport adds transfers.batch_id and transfers.row_id, and their
// unique index, to a ledger created before imports existed (both NULL for
// the transfers made until then, and for those made over HTTP or from a
// message since). Each change runs only when it is missing, so that a
// restart does not queue for the table's lock behind running transfers.
func (db *Database) migrateImport(ctx context.Context) error {
	var hasCols, addCols, hasIndex string
	switch db.schema {
	case sqliteSchema:
		hasCols = `SELECT count(*) FROM pragma_table_info('transfers') WHERE name IN ('batch_id', 'row_id')`
		addCols = `ALTER TABLE transfers ADD COLUMN batch_id TEXT; ALTER TABLE transfers ADD COLUMN row_id TEXT`
		hasIndex = `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'transfers' AND name = 'transfers_batch_row'`
	default:
		hasCols = `SELECT count(*) FROM pg_attribute WHERE attrelid = 'transfers'::regclass AND attname IN ('batch_id', 'row_id') AND NOT attisdropped`
		addCols = `ALTER TABLE transfers ADD COLUMN IF NOT EXISTS batch_id text, ADD COLUMN IF NOT EXISTS row_id text`
		hasIndex = `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'transfers'::regclass AND c.relname = 'transfers_batch_row'`
	}
	var n int
	if err := db.pool.queryRow(ctx, hasCols).Scan(&n); err != nil {
		return fmt.Errorf("look for transfers.batch_id and row_id: %w", err)
	}
	if n != 2 {
		if _, err := db.pool.exec(ctx, addCols); err != nil {
			return fmt.Errorf("add transfers.batch_id and row_id: %w", err)
		}
	}
	if err := db.pool.queryRow(ctx, hasIndex).Scan(&n); err != nil {
		return fmt.Errorf("look for the index transfers_batch_row: %w", err)
	}
	if n == 0 {
		// NULLs are distinct in a unique index (SQLite and PostgreSQL
		// alike): transfers without a batch never conflict.
		if _, err := db.pool.exec(ctx, `CREATE UNIQUE INDEX IF NOT EXISTS transfers_batch_row ON transfers (batch_id, row_id)`); err != nil {
			return fmt.Errorf("create the index transfers_batch_row: %w", err)
		}
	}
	return nil
}

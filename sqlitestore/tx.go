package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// Tx is an open sqlitestore transaction holding one key's lock and the
// database's write lock.
type Tx struct {
	store *Store
	conn  *sql.Conn
	tx    *sql.Tx
	key   lockKey
	ended bool
}

// TxFrom returns the *sql.Tx that the work passed to idem.Guard.Do runs in,
// and whether ctx carries one of this package's transactions.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := idem.TxFrom(ctx)
	if !ok {
		return nil, false
	}
	t, ok := tx.(*Tx)
	if !ok {
		return nil, false
	}
	return t.tx, true
}

// Handle implements idem.Tx; it returns the *sql.Tx.
func (t *Tx) Handle() any { return t.tx }

// Commit implements idem.Tx.
func (t *Tx) Commit(ctx context.Context, p *idem.CommitParams) error {
	if t.ended {
		return errors.New("sqlitestore: transaction already ended")
	}
	r := p.Record
	var header []byte
	if len(r.Result.Header) > 0 {
		var err error
		if header, err = json.Marshal(r.Result.Header); err != nil {
			t.end(false)
			return fmt.Errorf("sqlitestore: encode header: %w", err)
		}
	}
	body := r.Result.Body
	if body == nil {
		body = []byte{}
	}
	if _, err := t.tx.StmtContext(ctx, t.store.release).ExecContext(ctx); err != nil && !isBusy(err) {
		// SQLite looks the savepoint up before it checks for statements
		// still running (SQLITE_BUSY, "SQL statements in progress", when
		// the work left the rows of an INSERT … RETURNING open): BUSY
		// proves the savepoint, and so the transaction, is still there,
		// and COMMIT releases it. Anything else means it is gone.
		t.end(false)
		return fmt.Errorf("sqlitestore: the transaction ended under the work (a statement failed or was interrupted and SQLite rolled everything back, or the work ended it): %w", err)
	}
	res, err := t.tx.StmtContext(ctx, t.store.upsert).ExecContext(ctx,
		r.Scope, r.Key, r.Fingerprint, string(idem.StateCompleted), r.Result.Status, header, body,
		r.CreatedAt.UnixNano(), r.ExpiresAt.UnixNano(), p.Now.UnixNano())
	if err != nil {
		t.end(false)
		if isConstraint(err) {
			return idem.ErrConflict
		}
		return fmt.Errorf("sqlitestore: write record: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.end(false)
		if err != nil {
			return fmt.Errorf("sqlitestore: write record: %w", err)
		}
		return idem.ErrConflict // a live record with this key exists
	}
	return t.end(true)
}

// Rollback implements idem.Tx.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.ended {
		return nil
	}
	return t.end(false)
}

// end commits or rolls back, then releases the writer slot and the key.
func (t *Tx) end(commit bool) error {
	t.ended = true
	var err error
	if commit {
		err = t.tx.Commit()
		if err != nil {
			_ = t.tx.Rollback()
			err = fmt.Errorf("sqlitestore: commit: %w", err)
		}
	} else if rerr := t.tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
		err = fmt.Errorf("sqlitestore: rollback: %w", rerr)
	}
	_ = t.conn.Close() // back to the pool
	t.store.file.releaseWriter()
	t.store.file.unlock(t.key)
	return err
}

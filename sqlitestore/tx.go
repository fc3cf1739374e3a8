package sqlitestore

import (
	"context"
	"database/sql"
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
// or that a local step of leased mode (idem.Run.LocalStep) runs in, and
// whether ctx carries one of this package's transactions. A transaction
// wrapped by another (a tracing wrapper such as idemotel's) is found
// through its Unwrap() idem.Tx method.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := idem.TxFrom(ctx)
	if !ok {
		return nil, false
	}
	for {
		if t, own := tx.(*Tx); own {
			return t.tx, true
		}
		w, wraps := tx.(interface{ Unwrap() idem.Tx })
		if !wraps {
			break
		}
		tx = w.Unwrap()
	}
	// A local step's transaction reaches the work wrapped by idem, which
	// shows its Handle.
	if h, ok := tx.Handle().(*sql.Tx); ok && isOpenStep(h) {
		return h, true
	}
	return nil, false
}

// Handle implements idem.Tx; it returns the *sql.Tx.
func (t *Tx) Handle() any { return t.tx }

// Commit implements idem.Tx.
func (t *Tx) Commit(ctx context.Context, p *idem.CommitParams) error {
	if t.ended {
		return errors.New("sqlitestore: transaction already ended")
	}
	r := p.Record
	header, err := encodeHeader(r.Result.Header)
	if err != nil {
		t.rollback()
		return err
	}
	body := r.Result.Body
	if body == nil {
		body = []byte{}
	}
	if err := t.store.releaseSavepoint(ctx, t.tx); err != nil {
		t.rollback()
		return err
	}
	res, err := t.tx.StmtContext(ctx, t.store.upsert).ExecContext(ctx,
		r.Scope, r.Key, r.Fingerprint, string(idem.StateCompleted), r.Result.Status, header, body,
		r.CreatedAt.UnixNano(), r.ExpiresAt.UnixNano(), p.Now.UnixNano())
	if err != nil {
		t.rollback()
		if isConstraint(err) {
			return idem.ErrConflict
		}
		return fmt.Errorf("sqlitestore: write record: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.rollback()
		if err != nil {
			return fmt.Errorf("sqlitestore: write record: %w", err)
		}
		return idem.ErrConflict // a live record with this key exists
	}
	return t.commit(ctx)
}

// Rollback implements idem.Tx.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.ended {
		return nil
	}
	return t.rollback()
}

// commit commits (see Store.commitWrite), then releases the key.
func (t *Tx) commit(ctx context.Context) error {
	t.ended = true
	err := t.store.commitWrite(ctx, t.conn, t.tx)
	t.store.file.unlock(t.key)
	return err
}

// rollback rolls back, then releases the writer slot and the key.
func (t *Tx) rollback() error {
	t.ended = true
	err := t.store.endWrite(t.conn, t.tx)
	t.store.file.unlock(t.key)
	return err
}

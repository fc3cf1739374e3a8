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
// and whether ctx carries one of this package's transactions. A
// transaction wrapped by another (a tracing wrapper such as idemotel's)
// is found through its Unwrap() idem.Tx method.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := idem.TxFrom(ctx)
	for ok {
		if t, own := tx.(*Tx); own {
			return t.tx, true
		}
		w, wraps := tx.(interface{ Unwrap() idem.Tx })
		if !wraps {
			break
		}
		tx = w.Unwrap()
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
	var header []byte
	if len(r.Result.Header) > 0 {
		var err error
		if header, err = json.Marshal(r.Result.Header); err != nil {
			t.rollback()
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
		t.rollback()
		return fmt.Errorf("sqlitestore: the transaction ended under the work (a statement failed or was interrupted and SQLite rolled everything back, or the work ended it): %w", err)
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

// commit runs COMMIT, and returns when it ends or when ctx is done,
// whichever comes first. The transaction was begun detached from ctx (see
// Store.Begin), and SQLite cannot interrupt a COMMIT that waits on the disk
// (a hung fsync), so the wait is bounded here: at ctx's deadline the key and
// the writer slot are released and Commit fails with idem.ErrUnavailable
// while the COMMIT goes on in the background. Its outcome is then unknown,
// as when a connection to a database server drops during COMMIT. Nothing
// runs twice: the COMMIT keeps SQLite's write lock until it ends, and a
// Begin of the key meanwhile reads the record again once it has that lock.
func (t *Tx) commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		// Not started: roll back, so that the outcome is known.
		t.rollback()
		return fmt.Errorf("%w: sqlitestore: commit: %w", idem.ErrUnavailable, context.Cause(ctx))
	}
	t.ended = true
	done := make(chan error, 1)
	go func() {
		var err error
		if h := t.store.commitHook; h != nil {
			err = h()
		}
		if err == nil {
			err = t.tx.Commit()
		}
		if err != nil {
			_ = t.tx.Rollback()
			err = fmt.Errorf("sqlitestore: commit: %w", err)
		}
		_ = t.conn.Close() // back to the pool
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done: // it ended after all
		default:
			// Counted before the key is released, so that a Begin that
			// takes the key knows to read the record again.
			t.store.file.lateCommits.Add(1)
			go func() {
				<-done
				t.store.file.lateCommits.Add(-1)
			}()
			err = fmt.Errorf("%w: sqlitestore: COMMIT did not end within the caller's deadline; it goes on in the background and may yet commit: %w",
				idem.ErrUnavailable, context.Cause(ctx))
		}
	}
	t.release()
	return err
}

// rollback rolls back, then releases the writer slot and the key.
func (t *Tx) rollback() error {
	t.ended = true
	var err error
	if rerr := t.tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
		err = fmt.Errorf("sqlitestore: rollback: %w", rerr)
	}
	_ = t.conn.Close() // back to the pool
	t.release()
	return err
}

func (t *Tx) release() {
	t.store.file.releaseWriter()
	t.store.file.unlock(t.key)
}

package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// Tx is an open atomic-mode transaction that holds the advisory lock of one
// key. It implements idem.Tx. The work writes its effect through the
// *sql.Tx that TxFrom returns.
type Tx struct {
	store      *Store
	tx         *sql.Tx
	cancel     context.CancelFunc // ends the context tx was begun with
	scope, key string
	ended      bool
	expiredRow bool      // Begin saw an expired record of the key
	txStart    time.Time // the transaction's transaction_timestamp()
}

var _ idem.Tx = (*Tx)(nil)

// TxFrom returns the *sql.Tx that the work passed to idem.Guard.Do runs in,
// and whether ctx carries a sqldb transaction. Write the effect through it
// so that the effect commits with the record, or not at all.
//
// The *sql.Tx belongs to the Guard, which commits it with the record or
// rolls it back: do not call its Commit or Rollback (return an error from
// the work to roll back). A work that does makes the Guard's commit fail
// with an error matching idem.ErrUnavailable and sql.ErrTxDone, for which
// Transient is false; if it committed, its effect is then committed
// without a record. Savepoints (SAVEPOINT, ROLLBACK TO SAVEPOINT) are fine.
// Once Guard.Do has returned, the *sql.Tx answers sql.ErrTxDone.
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

// Handle implements idem.Tx; it returns the transaction as a *sql.Tx.
func (t *Tx) Handle() any { return t.tx }

// Commit implements idem.Tx with pgstore's statements (docs/POSTGRES.md,
// "How Commit writes"), each a round trip of its own. ctx bounds them, and
// the COMMIT too with a driver that watches the BeginTx context during it
// (pgx's stdlib does). As in pgstore, a live record rolls back with an
// error matching idem.ErrConflict, and an unknown outcome (the connection
// broke, or ctx ended, after COMMIT was sent) matches idem.ErrUnavailable.
func (t *Tx) Commit(ctx context.Context, p *idem.CommitParams) error {
	if t.ended {
		return nil
	}
	t.ended = true
	args, err := pgschema.InsertArgs(t.scope, t.key, p.Record, t.txStart)
	if err != nil {
		rollback(t.tx, t.cancel)
		return fmt.Errorf("sqldb: commit: %w", err)
	}
	// The end of ctx ends the transaction's context, which interrupts a
	// COMMIT that hangs.
	stop := context.AfterFunc(ctx, t.cancel)
	fail := func(op string, err error) error {
		stop()
		rollback(t.tx, t.cancel)
		err = ctxCause(ctx, err)
		if errors.Is(err, sql.ErrTxDone) && ctx.Err() == nil {
			err = fmt.Errorf("the transaction had already ended: the work must not commit or roll back the *sql.Tx of TxFrom: %w", err)
		}
		return unavailable(op, err)
	}
	if t.expiredRow {
		if _, err := t.tx.ExecContext(ctx, t.store.sql.Delete, t.scope, t.key, p.Now); err != nil {
			return fail("commit: delete expired", err)
		}
	}
	// The insert checks that it runs in Begin's transaction: a work that
	// ended it with an Exec of COMMIT or ROLLBACK, which database/sql does
	// not see, would otherwise have the record written on its own.
	res, err := t.tx.ExecContext(ctx, t.store.sql.Insert, args...)
	if pgschema.IsOtherTx(err) {
		return fail("commit: insert", fmt.Errorf("the work ended the transaction itself (an Exec of COMMIT or ROLLBACK); nothing was recorded: %w (%w)", sql.ErrTxDone, err))
	}
	if pgschema.IsUniqueViolation(err) {
		stop()
		rollback(t.tx, t.cancel)
		return fmt.Errorf("%w: sqldb: %s: %w", idem.ErrConflict, pgschema.RecordName(t.scope, t.key), err)
	}
	if err != nil {
		return fail("commit: insert", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fail("commit: insert", fmt.Errorf("the work ended the transaction itself (an Exec of COMMIT or ROLLBACK); nothing was recorded: %w", sql.ErrTxDone))
	}
	err = t.tx.Commit()
	stop()
	t.cancel()
	if err != nil {
		// A unique violation here is not the record's (its INSERT went
		// through): a deferred constraint of the work's own. The outcome
		// is a rollback, reported as unavailable, never as ErrConflict.
		return unavailable("commit", ctxCause(ctx, err))
	}
	return nil
}

// Rollback implements idem.Tx. It is safe to call after Commit or a
// previous Rollback, where it does nothing.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.ended {
		return nil
	}
	t.ended = true
	rollback(t.tx, t.cancel)
	return nil
}

// rollbackTimeout bounds a ROLLBACK. Past it, the transaction's context is
// cancelled: the driver drops the connection (database/sql then discards
// it) and the server rolls back on its own when it notices.
const rollbackTimeout = 5 * time.Second

// rollback rolls tx back, ignoring "already done" and a broken connection
// (database/sql discards a connection its driver reports invalid), then
// ends the transaction's context.
func rollback(tx *sql.Tx, cancel context.CancelFunc) {
	timer := time.AfterFunc(rollbackTimeout, cancel)
	_ = tx.Rollback()
	timer.Stop()
	cancel()
}

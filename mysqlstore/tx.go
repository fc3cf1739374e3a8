package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// Tx is an open atomic-mode transaction on a connection that holds the
// lock of one key. It implements idem.Tx. The work writes its effect
// through the *sql.Tx that TxFrom returns.
type Tx struct {
	store      *Store
	conn       *sql.Conn
	tx         *sql.Tx
	deferred   *deferredTx        // the transaction is the CALLs' (deferred.go), or nil
	cancel     context.CancelFunc // ends the context tx was begun with
	lock       string
	scope, key string
	ended      bool
	expiredRow bool // Begin saw an expired record of the key
}

var _ idem.Tx = (*Tx)(nil)

// TxFrom returns the *sql.Tx that the work passed to idem.Guard.Do runs in,
// or that a local step of leased work runs in (idem.Run.LocalStep), and
// whether ctx carries a mysqlstore transaction. Write the effect through
// it so that the effect commits with the record (or the recovery point),
// or not at all.
//
// The *sql.Tx belongs to the Guard (or LocalStep), which commits it or
// rolls it back: do not call its Commit or Rollback, nor Exec COMMIT,
// ROLLBACK or a statement that commits implicitly (DDL, LOCK TABLES);
// return an error from the work to roll back. A work that ends the
// transaction makes the commit fail with an error matching
// idem.ErrUnavailable, and nothing is recorded; if it committed, its
// effect is then committed without a record. A deadlock (error 1213) ends
// the transaction too: InnoDB rolls it back whole. On Open's connections
// the store then refuses the transaction's later statements; on a
// *sql.DB given to New, a statement sent after it commits on its own,
// outside the record's transaction. Return that error from the work;
// never retry a statement inside it (docs/MYSQL.md). Savepoints of the
// work's own are fine. Once Guard.Do has returned, the *sql.Tx answers
// sql.ErrTxDone.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := idem.TxFrom(ctx)
	if !ok {
		return nil, false
	}
	h, ok := tx.Handle().(*sql.Tx)
	return h, ok
}

// Handle implements idem.Tx; it returns the transaction as a *sql.Tx.
func (t *Tx) Handle() any { return t.tx }

// Commit implements idem.Tx. Where the procedures exist, the statements
// below are one CALL (procedure.go). In the work's transaction, it releases
// Begin's savepoint (which fails if the work ended the transaction), then
// deletes the key's record if Begin saw it expired (and only if it still
// is), inserts p.Record and commits; then it releases the key's lock, in the
// background once the COMMIT succeeded (a Begin meanwhile finds the
// committed record and replays it). A
// live record makes the INSERT fail on the primary key: the transaction is
// rolled back and the error matches idem.ErrConflict. ctx bounds the
// statements and the wait for COMMIT: a COMMIT that has not answered by
// then goes on in the background, Commit fails with an error matching
// idem.ErrUnavailable (the outcome is unknown), and the key stays locked
// until the COMMIT ends, after which the retry finds the record if it
// committed, and replays it.
func (t *Tx) Commit(ctx context.Context, p *idem.CommitParams) error {
	if t.ended {
		return nil
	}
	t.ended = true
	headers, err := headersLit(p.Record.Result.Header)
	if err != nil {
		return t.fail(ctx, "commit", err)
	}
	if t.store.procs.Load() {
		return t.commitCall(ctx, p, headers)
	}
	return t.commitStatements(ctx, p, headers)
}

// fail ends the transaction after err, a failure of op, and returns the
// error Commit reports for it.
func (t *Tx) fail(ctx context.Context, op string, err error) error {
	t.end(ctx, false)
	if isErr(err, errLockDeadlock) {
		return lostToConcurrent(t.scope, t.key, err)
	}
	return unavailable(op, ctxCause(ctx, err))
}

// commitStatements is Commit on a store without procedures: the
// savepoint's release, the expired record's DELETE, the record's INSERT
// and COMMIT, one statement at a time.
func (t *Tx) commitStatements(ctx context.Context, p *idem.CommitParams, headers string) error {
	fail := func(op string, err error) error { return t.fail(ctx, op, err) }
	r := p.Record
	if _, err := t.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+savepoint); err != nil {
		if isErr(err, errSavepointMissing) || errors.Is(err, sql.ErrTxDone) {
			err = fmt.Errorf("%w: %w", errWorkEndedTx, err)
		}
		return fail("commit", err)
	}
	if t.expiredRow {
		if _, err := t.tx.ExecContext(ctx, "DELETE FROM "+t.store.names.table+" WHERE "+keyIs(t.scope, t.key)+
			" AND expires_at <= "+intLit(micros(p.Now))); err != nil {
			return fail("commit: delete expired", err)
		}
	}
	state, body := storedValues(r)
	_, err := t.tx.ExecContext(ctx, "INSERT INTO "+t.store.names.table+" (scope, `key`, fingerprint, state, status, headers, body, created_at, expires_at, kind, last_error) VALUES ("+
		hexLit(t.scope)+", "+hexLit(t.key)+", "+hexLit(r.Fingerprint)+", "+hexLit(string(state))+", "+intLit(int64(r.Result.Status))+", "+
		headers+", "+hexLit(body)+", "+intLit(micros(r.CreatedAt))+", "+intLit(micros(r.ExpiresAt))+", '', '')")
	if isErr(err, errDupEntry) {
		t.end(ctx, false)
		return dupRecord(t.scope, t.key)
	}
	if err != nil {
		return fail("commit: insert", err)
	}
	// COMMIT runs in a goroutine of its own: database/sql gives it no
	// context, and a server that hangs (a stuck fsync, a lost network)
	// must not hold the caller past ctx.
	done := make(chan error, 1)
	go func() {
		if h := t.store.commitHook; h != nil {
			if err := h(); err != nil {
				_ = t.tx.Rollback()
				done <- err
				return
			}
		}
		done <- t.tx.Commit()
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		go func() {
			<-done
			t.end(context.Background(), true)
		}()
		return unavailable("commit", fmt.Errorf("COMMIT did not answer in time, and goes on in the background: the outcome is unknown: %w", context.Cause(ctx)))
	}
	if isErr(err, errLockDeadlock) || isErr(err, errCertification) {
		// InnoDB alone never fails a COMMIT so; a Galera node does when
		// certification finds that a transaction committed on another
		// node wrote a row this one wrote (the key's record, or a row of
		// the effect). Nothing was committed: the Guard answers from the
		// other transaction's record, or refuses as in flight.
		t.end(ctx, false)
		return fmt.Errorf("%w: mysqlstore: %s: COMMIT refused by certification (error %d)", idem.ErrConflict, recordName(t.scope, t.key), mustNumber(err))
	}
	if err != nil {
		t.end(ctx, false)
		// A duplicate here is not the record's (its INSERT went through).
		return unavailable("commit", err)
	}
	// The lock is released before Commit returns. Releasing it in the
	// background saved a round trip but let the next call of the key find
	// it still held after the record had expired, and refuse it as in
	// flight (inboxtest's IDIsRememberedForSevenDaysByDefault).
	t.end(context.WithoutCancel(ctx), true)
	return nil
}

// lostToConcurrent is the error of a transaction the server rolled back
// because a concurrent one won: a deadlock, or, on Galera, a certification
// conflict with a transaction committed on another node (MariaDB reports
// both as ER_LOCK_DEADLOCK, at any statement or at COMMIT). Nothing was
// recorded. It matches idem.ErrConflict, so the Guard reads the key again:
// it replays the winner's record when this node has applied it, and
// answers in flight otherwise; the effect ran in no committed transaction.
func lostToConcurrent(scope, key string, err error) error {
	return fmt.Errorf("%w: mysqlstore: %s: rolled back for a concurrent transaction (error %d): %w", idem.ErrConflict, recordName(scope, key), mustNumber(err), err)
}

// end rolls back what is left of the transaction, unless committed, and
// releases the key's lock and the connection.
func (t *Tx) end(ctx context.Context, committed bool) {
	if !committed {
		_ = t.tx.Rollback()
	}
	t.cancel()
	releaseLock(ctx, t.conn, t.lock)
}

// Rollback implements idem.Tx. It is safe to call after Commit or a
// previous Rollback, where it does nothing.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.ended {
		return nil
	}
	t.ended = true
	t.end(ctx, false)
	return nil
}

// mustNumber is err's MySQL error number, 0 if it has none.
func mustNumber(err error) uint16 {
	n, _ := errNumber(err)
	return n
}

// storedValues are the state and body the record r is stored with: a
// record without a state is completed, a nil body is empty.
func storedValues(r *idem.Record) (idem.State, []byte) {
	state, body := r.State, r.Result.Body
	if state == "" {
		state = idem.StateCompleted
	}
	if body == nil {
		body = []byte{}
	}
	return state, body
}

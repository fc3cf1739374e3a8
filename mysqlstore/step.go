package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// stepTx is a local step's transaction (idem.StepTx): it holds the row
// lock of the record that BeginStep took, fenced, until it ends.
type stepTx struct {
	store  *Store
	conn   *sql.Conn
	tx     *sql.Tx
	cancel context.CancelFunc
	lease  idem.Lease
	name   string
	now    time.Time // BeginStepParams.Now, the step's created_at
	ended  bool
}

// BeginStep implements idem.LeasedTxStore. On a connection of its own, it
// begins a READ COMMITTED transaction, sets the session's wait_timeout
// (Config.IdleTimeout: a vanished holder must not keep the row locked),
// locks the record's row FOR UPDATE, fenced, and sets a savepoint: while
// the step's transaction is open no claim can take the record over (a
// claim waits for the row). The step's Handle is a *sql.Tx, so TxFrom
// works in a local step as in atomic work.
func (s *Store) BeginStep(ctx context.Context, p *idem.BeginStepParams) (idem.StepTx, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, unavailable("begin step", err)
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &stepTx{store: s, conn: conn, cancel: cancel, lease: p.Lease, name: p.Name, now: p.Now}
	fail := func(err error) (idem.StepTx, error) {
		if t.tx != nil {
			_ = t.tx.Rollback()
		}
		cancel()
		closeConn(conn)
		return nil, unavailable("begin step", ctxCause(ctx, err))
	}
	if s.setTimeout != "" {
		if _, err := conn.ExecContext(ctx, "SET "+s.setTimeout[:len(s.setTimeout)-2]); err != nil {
			return fail(err)
		}
	}
	if t.tx, err = conn.BeginTx(tctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}); err != nil {
		return fail(err)
	}
	var one int
	err = t.tx.QueryRowContext(ctx, "SELECT 1 FROM "+s.names.table+" WHERE "+fence(p.Lease)+" FOR UPDATE").Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		_ = t.tx.Rollback()
		cancel()
		_ = conn.Close()
		return nil, fenced("begin step", p.Lease)
	}
	if err != nil {
		return fail(err)
	}
	if _, err := t.tx.ExecContext(ctx, "SAVEPOINT "+savepoint); err != nil {
		return fail(err)
	}
	return t, nil
}

// Handle returns the transaction as a *sql.Tx, which Run.LocalStep ends.
func (t *stepTx) Handle() any { return t.tx }

// Commit releases BeginStep's savepoint (which fails if the step ended the
// transaction itself: its writes would otherwise commit without the
// recovery point, or the recovery point without the row lock that fenced
// it), upserts the step and commits.
func (t *stepTx) Commit(ctx context.Context, output []byte) error {
	if t.ended {
		return fmt.Errorf("mysqlstore: step %q: %w", t.name, sql.ErrTxDone)
	}
	t.ended = true
	defer t.end()
	if _, err := t.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+savepoint); err != nil {
		if isErr(err, errSavepointMissing) || errors.Is(err, sql.ErrTxDone) {
			err = fmt.Errorf("%w: %w", errWorkEndedTx, err)
		}
		return unavailable("commit step", err)
	}
	if _, err := t.tx.ExecContext(ctx, t.store.upsertStep(t.lease.Scope, t.lease.Key, t.name, output, t.now)); err != nil {
		return unavailable("commit step", err)
	}
	return unavailable("commit step", t.tx.Commit())
}

// end rolls back what is left and returns the connection; one that cannot
// roll back is closed.
func (t *stepTx) end() {
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		t.cancel()
		closeConn(t.conn)
		return
	}
	t.cancel()
	_ = t.conn.Close()
}

// Rollback rolls the transaction back. It does nothing after Commit or a
// previous Rollback.
func (t *stepTx) Rollback(ctx context.Context) error {
	if t.ended {
		return nil
	}
	t.ended = true
	t.end()
	return nil
}

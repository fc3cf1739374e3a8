package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// openSteps holds the *sql.Tx of every open local step, so that TxFrom
// accepts the handle of a step of this package and no other *sql.Tx.
var openSteps sync.Map // *sql.Tx → struct{}

func isOpenStep(tx *sql.Tx) bool {
	_, ok := openSteps.Load(tx)
	return ok
}

// BeginStep implements idem.LeasedTxStore. The step runs in an IMMEDIATE
// transaction that holds the writer from the fence check to its commit,
// as atomic work does (see Store.Begin): no claim, heartbeat or other
// write of the file runs meanwhile, so no claim can take the record over
// while the step runs, and they wait for it at most Config.BusyTimeout.
// The step's Handle is its *sql.Tx, which TxFrom returns in the step's
// ctx as it does in atomic work.
func (s *Store) BeginStep(ctx context.Context, p *idem.BeginStepParams) (idem.StepTx, error) {
	if s.file == nil {
		return nil, fmt.Errorf("sqlitestore: BeginStep: %w", ErrReadOnly)
	}
	conn, tx, err := s.beginWrite(ctx, "begin step", true)
	if err != nil {
		return nil, unavailable("begin step", err)
	}
	if err := s.fence(ctx, tx, p.Lease); err != nil {
		_ = s.endWrite(conn, tx)
		return nil, unavailable("begin step", err)
	}
	openSteps.Store(tx, struct{}{})
	return &stepTx{store: s, conn: conn, tx: tx, lease: p.Lease, name: p.Name, now: p.Now}, nil
}

// stepTx is an open local step: one IMMEDIATE transaction holding the
// writer slot.
type stepTx struct {
	store *Store
	conn  *sql.Conn
	tx    *sql.Tx
	lease idem.Lease
	name  string
	now   time.Time
	ended bool
}

// Handle implements idem.StepTx; it returns the *sql.Tx.
func (st *stepTx) Handle() any { return st.tx }

// Commit implements idem.StepTx: it writes the step's recovery point in
// the step's transaction and commits, within ctx's deadline (see
// Store.commitWrite). The writer has been held since BeginStep checked the
// lease, so the lease is still current.
func (st *stepTx) Commit(ctx context.Context, output []byte) error {
	if st.ended {
		return fmt.Errorf("sqlitestore: step %q already ended", st.name)
	}
	st.ended = true
	defer openSteps.Delete(st.tx)
	s := st.store
	if err := s.releaseSavepoint(ctx, st.tx); err != nil {
		_ = s.endWrite(st.conn, st.tx)
		return err
	}
	if err := s.saveStep(ctx, st.tx, st.lease, st.name, output, st.now); err != nil {
		_ = s.endWrite(st.conn, st.tx)
		return unavailable("save step", err)
	}
	if err := s.commitWrite(ctx, st.conn, st.tx); err != nil {
		return unavailable("commit step", err)
	}
	return nil
}

// Rollback implements idem.StepTx. It is a no-op after Commit.
func (st *stepTx) Rollback(context.Context) error {
	if st.ended {
		return nil
	}
	st.ended = true
	openSteps.Delete(st.tx)
	return st.store.endWrite(st.conn, st.tx)
}

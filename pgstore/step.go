package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// stepTx is a local step's transaction (idem.StepTx): it holds the row
// lock of the record that BeginStep took, fenced, until it ends.
type stepTx struct {
	store   *Store
	conn    *pgxpool.Conn
	lease   idem.Lease
	name    string
	now     time.Time // BeginStepParams.Now, the step's created_at
	txStart time.Time // BeginStep's transaction_timestamp()
	handle  *handle
	ended   bool
}

// Handle returns the transaction as a pgx.Tx whose Commit and Rollback
// refuse: Run.LocalStep ends it.
func (t *stepTx) Handle() any { return t.handle }

// Commit pipelines, in one round trip, the upsert of the step and COMMIT.
// The upsert fails unless it runs in the transaction BeginStep started (a
// step that ended it itself would otherwise commit its recovery point
// without its writes, and without the row lock that fenced it); the error
// stops the pipeline before COMMIT and the transaction is rolled back.
func (t *stepTx) Commit(ctx context.Context, output []byte) error {
	if t.ended {
		return fmt.Errorf("pgstore: step %q: %w", t.name, pgx.ErrTxClosed)
	}
	t.ended = true
	var commitTag pgconn.CommandTag
	b := &pgx.Batch{}
	b.Queue(t.store.leased.CommitStep, t.lease.Scope, t.lease.Key, t.name, output, t.now, t.txStart)
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		commitTag = ct
		return nil
	})
	err := t.conn.Conn().SendBatch(ctx, b).Close()
	endConn(ctx, t.conn) // rolls back if the pipeline stopped short of COMMIT
	switch {
	case pgschema.IsOtherTx(err):
		return fmt.Errorf("pgstore: step %q ended the transaction itself (an Exec of COMMIT or ROLLBACK); nothing was recorded: %w (%w)", t.name, pgx.ErrTxClosed, err)
	case err != nil:
		return unavailable("commit step", err)
	case commitTag.String() != "COMMIT":
		return unavailable("commit step", fmt.Errorf("the transaction was rolled back (%s): %w", commitTag, pgx.ErrTxCommitRollback))
	}
	return nil
}

// Rollback rolls the transaction back. It does nothing after Commit or a
// previous Rollback.
func (t *stepTx) Rollback(ctx context.Context) error {
	if t.ended {
		return nil
	}
	t.ended = true
	endConn(ctx, t.conn)
	return nil
}

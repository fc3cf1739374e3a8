package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is an open atomic-mode transaction that holds the advisory lock of one
// key. It implements idem.Tx. The work writes its effect through the pgx.Tx
// that TxFrom returns.
type Tx struct {
	store      *Store
	conn       *pgxpool.Conn
	scope, key string
	handle     *handle
	ended      bool
	expiredRow bool      // Begin saw an expired record of the key
	txStart    time.Time // Begin's transaction_timestamp()
	// staged are the outbox rows that outbox.Stage gave the transaction
	// (as the INSERT's arguments): Commit writes them after the record.
	staged [][]any
}

var _ idem.Tx = (*Tx)(nil)

// TxFrom returns the pgx.Tx that the work passed to idem.Guard.Do runs in,
// or that a local step of leased work runs in (idem.Run.LocalStep), and
// whether ctx carries a pgstore transaction. Write the effect through it
// so that the effect commits with the record (or the recovery point), or
// not at all.
//
// The pgx.Tx belongs to the Guard (or LocalStep): its Commit and Rollback
// return an error and do nothing (return an error from the work to roll
// back). Its Begin opens a savepoint as usual, for pgx.BeginFunc and the
// like.
func TxFrom(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := idem.TxFrom(ctx)
	if !ok {
		return nil, false
	}
	h, ok := tx.Handle().(pgx.Tx)
	return h, ok
}

// Handle implements idem.Tx; it returns the transaction as a pgx.Tx.
func (t *Tx) Handle() any { return t.handle }

// Commit implements idem.Tx. It pipelines, in one round trip, the DELETE
// of the key's record if Begin saw it expired (and only if it still is),
// the INSERT of p.Record and COMMIT (docs/POSTGRES.md, "How Commit
// writes"). A live record makes the INSERT fail and the server skip the
// COMMIT: the transaction is rolled back and the error matches
// idem.ErrConflict. When the connection breaks after COMMIT was sent, the
// outcome is unknown and the error matches idem.ErrUnavailable: the retry
// finds the record if it committed, and replays it.
func (t *Tx) Commit(ctx context.Context, p *idem.CommitParams) error {
	if t.ended {
		return nil
	}
	t.ended = true
	args, err := pgschema.InsertArgs(t.scope, t.key, p.Record, t.txStart)
	if err != nil {
		endConn(ctx, t.conn)
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	var commitTag pgconn.CommandTag
	b := &pgx.Batch{}
	if t.expiredRow {
		b.Queue(t.store.sql.Delete, t.scope, t.key, p.Now)
	}
	// The INSERT fails unless it runs in Begin's transaction (see
	// pgschema.Statements.Insert): a work that ended it itself (an Exec of
	// COMMIT or ROLLBACK, perhaps followed by BEGIN) would otherwise have
	// its record commit without the effect. The error stops the pipeline
	// before COMMIT.
	b.Queue(t.store.sql.Insert, args...)
	// The staged messages after the record: the INSERT above has proved
	// the transaction is Begin's, so they never commit without it.
	if len(t.staged) > 0 {
		ins := t.store.outboxSQL().Insert
		for _, a := range t.staged {
			b.Queue(ins, a...)
		}
	}
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		commitTag = ct
		return nil
	})
	err = t.conn.Conn().SendBatch(ctx, b).Close()
	endConn(ctx, t.conn) // rolls back if the pipeline stopped short of COMMIT
	switch {
	case pgschema.IsOtherTx(err):
		return fmt.Errorf("pgstore: commit: the work ended the transaction itself (an Exec of COMMIT or ROLLBACK); nothing was recorded: %w (%w)", pgx.ErrTxClosed, err)
	case t.store.isRecordConflict(err):
		return fmt.Errorf("%w: pgstore: %s: %w", idem.ErrConflict, recordName(t.scope, t.key), err)
	case err != nil:
		return unavailable("commit", err)
	case commitTag.String() != "COMMIT":
		// COMMIT of a transaction that the work left failed (it ignored
		// an error of its own) is a rollback.
		return unavailable("commit", fmt.Errorf("the transaction was rolled back (%s): %w", commitTag, pgx.ErrTxCommitRollback))
	}
	if len(t.staged) > 0 {
		t.store.outboxNotifier().poke()
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
	endConn(ctx, t.conn)
	return nil
}

// errGuardOwned is returned by Commit and Rollback of the pgx.Tx that
// TxFrom returns in atomic work, errStepOwned in a local step.
var (
	errGuardOwned = errors.New("pgstore: this transaction is committed by idem.Guard with its record; return an error from the work to roll it back")
	errStepOwned  = errors.New("pgstore: this transaction is committed by idem.Run.LocalStep with its recovery point; return an error from the step to roll it back")
)

// handle is the pgx.Tx given to the work (or a local step). It forwards to
// pgx's own transaction while its owner is open and behaves as a closed
// pgx.Tx afterwards, so a reference kept past the work cannot reach a
// connection that is back in the pool.
type handle struct {
	tx    pgx.Tx
	ended *bool // the owner's
	owned error // what Commit and Rollback return while the owner is open
}

var _ pgx.Tx = (*handle)(nil)

// closedTx is a pgx.Tx whose every method reports pgx.ErrTxClosed.
var closedTx = func() pgx.Tx {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	return pgx.FailedBatchResults(b, pgx.ErrTxClosed).Tx()
}()

func (h *handle) cur() pgx.Tx {
	if *h.ended {
		return closedTx
	}
	return h.tx
}

// Begin starts a pseudo nested transaction (a savepoint).
func (h *handle) Begin(ctx context.Context) (pgx.Tx, error) { return h.cur().Begin(ctx) }

// Commit returns an error: the Guard (or LocalStep) commits the
// transaction.
func (h *handle) Commit(context.Context) error {
	if *h.ended {
		return pgx.ErrTxClosed
	}
	return h.owned
}

// Rollback returns an error: the Guard (or LocalStep) rolls the transaction
// back when the work returns an error.
func (h *handle) Rollback(context.Context) error {
	if *h.ended {
		return pgx.ErrTxClosed
	}
	return h.owned
}

func (h *handle) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return h.cur().CopyFrom(ctx, table, cols, src)
}

func (h *handle) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return h.cur().SendBatch(ctx, b)
}

func (h *handle) LargeObjects() pgx.LargeObjects { return h.cur().LargeObjects() }

func (h *handle) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return h.cur().Prepare(ctx, name, sql)
}

func (h *handle) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return h.cur().Exec(ctx, sql, args...)
}

func (h *handle) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return h.cur().Query(ctx, sql, args...)
}

func (h *handle) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return h.cur().QueryRow(ctx, sql, args...)
}

func (h *handle) Conn() *pgx.Conn { return h.cur().Conn() }

// isRecordConflict reports whether err is the unique violation of the
// record table's primary key: another record of the key committed first.
// Any other unique violation in the pipeline (a DEFERRABLE constraint of
// the work's own tables checked at COMMIT) is the work's failure, not a
// conflict to be answered from a record that does not exist.
func (s *Store) isRecordConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == pgschema.UniqueViolation &&
		pe.SchemaName == s.cfg.Schema && pe.TableName == s.cfg.Table
}

package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// The writer discipline. Every write of a Store (atomic work in Begin and
// Tx, the leased writes and local steps) goes through beginWrite and ends
// with commitWrite or endWrite:
//
//   - the process's writer slot first (acquireWriter, bounded by
//     Config.BusyTimeout), so that this process's writers queue in Go;
//   - then BEGIN IMMEDIATE (through _txlock) on a connection of the pool,
//     so that SQLite's write lock is taken at BEGIN, waiting at most the
//     busy timeout for a COMMIT still going on or another program;
//   - COMMIT bounded by the caller's deadline (commitWrite).

// beginWrite takes the writer slot and begins an IMMEDIATE transaction. op
// names the call in errors. With savepoint, it opens the savepoint that
// releaseSavepoint checks (see Store.Begin). On error it holds nothing.
//
// The connection is taken under ctx, so a full pool cannot hold the call
// past its deadline. The transaction is detached from ctx's cancellation:
// database/sql would otherwise roll it back on its own when ctx ends,
// between a successful work and its commit. The caller always ends it, and
// statements still obey their own ctx.
func (s *Store) beginWrite(ctx context.Context, op string, savepoint bool) (*sql.Conn, *sql.Tx, error) {
	if err := s.file.acquireWriter(ctx, s.cfg.BusyTimeout); err != nil {
		return nil, nil, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		s.file.releaseWriter()
		return nil, nil, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	detached := context.WithoutCancel(ctx)
	tx, err := conn.BeginTx(detached, nil)
	if err == nil && savepoint {
		// SQLite rolls a whole transaction back by itself after some
		// failed statements (an interrupt when ctx ends mid-statement,
		// a full disk, out of memory) and carries on in autocommit. A
		// work that ignored that error would have its record committed
		// on its own. The commit releases this savepoint first: it is
		// gone if the transaction is.
		if _, err = tx.StmtContext(detached, s.savepoint).ExecContext(detached); err != nil {
			_ = tx.Rollback()
		}
	}
	if err != nil {
		_ = conn.Close()
		s.file.releaseWriter()
		if isBusy(err) {
			// The write lock stayed with another connection for
			// BusyTimeout: a COMMIT still going on after its caller's
			// deadline, or another program writing the file.
			return nil, nil, fmt.Errorf("%w: sqlitestore: %s: %w", idem.ErrUnavailable, op, err)
		}
		return nil, nil, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	return conn, tx, nil
}

// releaseSavepoint releases the savepoint beginWrite opened, and fails if
// the transaction has ended under the work.
func (s *Store) releaseSavepoint(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.StmtContext(ctx, s.release).ExecContext(ctx); err != nil && !isBusy(err) {
		// SQLite looks the savepoint up before it checks for statements
		// still running (SQLITE_BUSY, "SQL statements in progress", when
		// the work left the rows of an INSERT … RETURNING open): BUSY
		// proves the savepoint, and so the transaction, is still there,
		// and COMMIT releases it. Anything else means it is gone.
		return fmt.Errorf("sqlitestore: the transaction ended under the work (a statement failed or was interrupted and SQLite rolled everything back, or the work ended it): %w", err)
	}
	return nil
}

// endWrite rolls back, returns the connection to the pool and releases the
// writer slot.
func (s *Store) endWrite(conn *sql.Conn, tx *sql.Tx) error {
	var err error
	if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
		err = fmt.Errorf("sqlitestore: rollback: %w", rerr)
	}
	_ = conn.Close() // back to the pool
	s.file.releaseWriter()
	return err
}

// commitWrite runs COMMIT, and returns when it ends or when ctx is done,
// whichever comes first; either way it releases the writer slot. SQLite
// cannot interrupt a COMMIT that waits on the disk (a hung fsync), so the
// wait is bounded here: at ctx's deadline the writer slot is released and
// commitWrite fails with idem.ErrUnavailable while the COMMIT goes on in
// the background. Its outcome is then unknown, as when a connection to a
// database server drops during COMMIT. Nothing runs twice: the COMMIT keeps
// SQLite's write lock until it ends, the next BEGIN IMMEDIATE waits for it,
// and lateCommits tells Begin to read its key's record again after that.
func (s *Store) commitWrite(ctx context.Context, conn *sql.Conn, tx *sql.Tx) error {
	if err := ctx.Err(); err != nil {
		// Not started: roll back, so that the outcome is known.
		_ = s.endWrite(conn, tx)
		return fmt.Errorf("%w: sqlitestore: commit: %w", idem.ErrUnavailable, context.Cause(ctx))
	}
	done := make(chan error, 1)
	go func() {
		var err error
		if h := s.commitHook; h != nil {
			err = h()
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			_ = tx.Rollback()
			err = fmt.Errorf("sqlitestore: commit: %w", err)
		}
		_ = conn.Close() // back to the pool
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case err = <-done: // it ended after all
		default:
			// Counted before the writer slot (and the caller's key)
			// is released, so that a Begin that takes the key knows
			// to read the record again.
			s.file.lateCommits.Add(1)
			go func() {
				<-done
				s.file.lateCommits.Add(-1)
			}()
			err = fmt.Errorf("%w: sqlitestore: COMMIT did not end within the caller's deadline; it goes on in the background and may yet commit: %w",
				idem.ErrUnavailable, context.Cause(ctx))
		}
	}
	s.file.releaseWriter()
	return err
}

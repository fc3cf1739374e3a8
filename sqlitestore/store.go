package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/idemkit/idem"
)

// Store is an idem.Store on a SQLite file. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string     // the file SQLite opened: absolute, symlinks resolved
	file *fileState // nil when read-only
	cfg  Config

	read, upsert       *sql.Stmt
	savepoint, release *sql.Stmt
	stmts              map[string]*sql.Stmt // leased mode's, by query (see leasedQueries)

	closeOnce sync.Once
	closeErr  error

	// commitHook, when set (by tests), runs just before COMMIT, standing
	// for a COMMIT that hangs or fails.
	commitHook func() error
}

var (
	_ idem.Store          = (*Store)(nil)
	_ idem.Inspector      = (*Store)(nil)
	_ idem.ExpiredDeleter = (*Store)(nil)
)

// DB returns the store's database, for the application's own schema and
// reads. Writes that belong to an idempotent call go through TxFrom(ctx).
// On a store opened with Config.ReadOnly, it is read-only too.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database, then releases the file to other processes.
// Calls after the first return the first one's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.db.Close()
		if s.file != nil {
			s.file.release()
		}
	})
	return s.closeErr
}

// Begin implements idem.Store.
//
// It takes the process-local try-lock first and reads the record while
// holding it: this process's writers of the key hold that lock until they
// have committed, so the read sees any record they wrote, and a call that
// finds no record runs the work knowing that no other call in this process
// has completed the key. A caller refused by the lock reads too: a live
// record is final, and answering from it beats a spurious ErrInFlight.
//
// While a COMMIT that outlived its caller's deadline goes on (see
// Tx.Commit), the read is repeated inside the transaction, after BEGIN
// IMMEDIATE has waited for that COMMIT to end. The (scope, key) primary key
// stays the final arbiter: a record committed between the read and BEGIN
// IMMEDIATE all the same (by another program writing the file) makes the
// upsert in Commit fail with idem.ErrConflict, the work's effect is rolled
// back and the guard answers from that record.
func (s *Store) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if s.file == nil {
		return nil, nil, fmt.Errorf("sqlitestore: Begin: %w", ErrReadOnly)
	}
	k := lockKey{p.Scope, p.Key}
	locked := s.file.tryLock(k)
	// A COMMIT that outlived its caller's deadline (see Tx.commit) may
	// still write this key's record after the read below; if one is going
	// on, the record is read again once BEGIN IMMEDIATE has waited for it.
	// Loaded before the read: zero means any such COMMIT ended before it.
	reread := locked && s.file.lateCommits.Load() > 0
	rec, err := live(ctx, s.read, p.Scope, p.Key, p.Now)
	switch {
	case !locked && err == nil && rec == nil:
		return nil, nil, idem.ErrInFlight
	case !locked:
		return rec, nil, err
	case err != nil || rec != nil:
		s.file.unlock(k)
		return rec, nil, err
	}
	conn, tx, err := s.beginWrite(ctx, "begin", true)
	if err != nil {
		s.file.unlock(k)
		return nil, nil, err
	}
	if reread {
		rec, err := live(ctx, tx.StmtContext(ctx, s.read), p.Scope, p.Key, p.Now)
		if err != nil || rec != nil {
			s.endWrite(conn, tx)
			s.file.unlock(k)
			return rec, nil, err
		}
	}
	return nil, &Tx{store: s, conn: conn, tx: tx, key: k}, nil
}

// Lookup implements idem.Inspector.
func (s *Store) Lookup(ctx context.Context, p *idem.LookupParams) (*idem.Record, error) {
	return lookup(ctx, s.read, p.Scope, p.Key)
}

// DeleteExpired implements idem.ExpiredDeleter.
func (s *Store) DeleteExpired(ctx context.Context, p *idem.DeleteExpiredParams) (int, error) {
	if p.Limit <= 0 {
		return 0, fmt.Errorf("sqlitestore: DeleteExpired: Limit must be positive, got %d", p.Limit)
	}
	if s.file == nil {
		return 0, fmt.Errorf("sqlitestore: DeleteExpired: %w", ErrReadOnly)
	}
	if err := s.file.acquireWriter(ctx, s.cfg.BusyTimeout); err != nil {
		return 0, err
	}
	defer s.file.releaseWriter()
	res, err := s.db.ExecContext(ctx,
		`DELETE FROM idem_records WHERE (scope, key) IN
		   (SELECT scope, key FROM idem_records WHERE expires_at <= ? LIMIT ?)`,
		p.Now.UnixNano(), p.Limit)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: delete expired: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

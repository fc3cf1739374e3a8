package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/idemkit/idem"
)

// Store is an idem.Store on a SQLite file. It is safe for concurrent use.
type Store struct {
	db    *sql.DB
	path  string
	file  *fileState
	cfg   Config
	owner bool

	read, upsert       *sql.Stmt
	savepoint, release *sql.Stmt
}

var (
	_ idem.Store          = (*Store)(nil)
	_ idem.Inspector      = (*Store)(nil)
	_ idem.ExpiredDeleter = (*Store)(nil)
)

// Open opens (creating if needed) the SQLite database at path, migrates its
// schema and returns the store. A nil cfg means defaults.
func Open(ctx context.Context, path string, cfg *Config) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlitestore: Open: bad database path %q", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: Open: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", c.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+c.Synchronous+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+abs+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: Open: %w", err)
	}
	db.SetMaxOpenConns(c.MaxOpenConns)
	db.SetMaxIdleConns(c.MaxOpenConns)
	s := &Store{db: db, path: abs, file: acquireFile(abs), cfg: c, owner: true}
	err = s.migrate(ctx)
	if err == nil {
		err = s.prepare(ctx)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// DB returns the store's database, for the application's own schema and
// reads. Writes that belong to an idempotent call go through TxFrom(ctx).
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error {
	if !s.owner {
		return nil
	}
	s.owner = false
	releaseFile(s.path)
	return s.db.Close()
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
// Across processes the (scope, key) primary key is the final arbiter: a
// record committed by another process between the read and BEGIN IMMEDIATE
// makes the upsert in Commit fail with idem.ErrConflict, the work's effect is
// rolled back and the guard answers from that record.
func (s *Store) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	k := lockKey{p.Scope, p.Key}
	locked := s.file.tryLock(k)
	rec, err := s.live(ctx, p.Scope, p.Key, p.Now)
	switch {
	case !locked && err == nil && rec == nil:
		return nil, nil, idem.ErrInFlight
	case !locked:
		return rec, nil, err
	case err != nil || rec != nil:
		s.file.unlock(k)
		return rec, nil, err
	}
	if err := s.file.acquireWriter(ctx, s.cfg.BusyTimeout); err != nil {
		s.file.unlock(k)
		return nil, nil, err
	}
	// The connection is taken under ctx, so a full pool cannot hold the
	// call past its deadline. The transaction (BEGIN IMMEDIATE, through
	// _txlock) is detached from ctx's cancellation: database/sql would
	// otherwise roll it back on its own when ctx ends, between a
	// successful work and the guard's commit. The guard always ends it,
	// and the work's statements still obey their ctx.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		s.file.releaseWriter()
		s.file.unlock(k)
		return nil, nil, fmt.Errorf("sqlitestore: begin: %w", err)
	}
	detached := context.WithoutCancel(ctx)
	tx, err := conn.BeginTx(detached, nil)
	if err == nil {
		// SQLite rolls a whole transaction back by itself after some
		// failed statements (an interrupt when ctx ends mid-statement,
		// a full disk, out of memory) and carries on in autocommit. A
		// work that ignored that error would have its record committed
		// on its own. Commit releases this savepoint first: it is gone
		// if the transaction is.
		if _, err = tx.StmtContext(detached, s.savepoint).ExecContext(detached); err != nil {
			_ = tx.Rollback()
		}
	}
	if err != nil {
		_ = conn.Close()
		s.file.releaseWriter()
		s.file.unlock(k)
		return nil, nil, fmt.Errorf("sqlitestore: begin: %w", err)
	}
	return nil, &Tx{store: s, conn: conn, tx: tx, key: k}, nil
}

// Lookup implements idem.Inspector.
func (s *Store) Lookup(ctx context.Context, p *idem.LookupParams) (*idem.Record, error) {
	return s.lookup(ctx, p.Scope, p.Key)
}

// DeleteExpired implements idem.ExpiredDeleter.
func (s *Store) DeleteExpired(ctx context.Context, p *idem.DeleteExpiredParams) (int, error) {
	if p.Limit <= 0 {
		return 0, fmt.Errorf("sqlitestore: DeleteExpired: Limit must be positive, got %d", p.Limit)
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

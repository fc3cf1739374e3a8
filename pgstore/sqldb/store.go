package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// Store is an idem.Store on PostgreSQL through database/sql. It is safe for
// concurrent use.
type Store struct {
	db    *sql.DB
	cfg   Config
	names pgschema.Names
	sql   pgschema.Statements // built once from names

	connCheck pgschema.ConnCheck
	// noBeginFunc is set once the table turned out not to have the begin
	// function of migration 3 (see claim).
	noBeginFunc atomic.Bool

	// lockKey is replaced by tests to force hash collisions.
	lockKey func(scope, key string) int64
}

var (
	_ idem.Store          = (*Store)(nil)
	_ idem.Inspector      = (*Store)(nil)
	_ idem.ExpiredDeleter = (*Store)(nil)
)

// New returns a Store whose records live in db's database, which must be
// PostgreSQL. A nil cfg means defaults. When cfg.Schema is empty, New asks
// a connection of db for its current_schema(). Unless cfg.SkipMigrate is
// set, New applies the migrations (see Migrate). The caller keeps
// ownership of db.
func New(ctx context.Context, db *sql.DB, cfg *Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqldb: New: db is nil")
	}
	c, set, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.ProbeDB == db {
		return nil, errors.New("sqldb: Config.ProbeDB must be a second handle on the database, not db itself")
	}
	if err := set.Resolve(ctx, querier{db}, "sqldb"); err != nil {
		return nil, err
	}
	c.Schema = set.Schema
	n := pgschema.NewNames(c.Schema, c.Table)
	s := &Store{db: db, cfg: c, names: n, sql: pgschema.NewStatements(n, set.IdleInTransactionTimeout)}
	s.lockKey = s.hashLockKey
	if !c.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// lockSQL is the lock statement the server takes (see pgschema.ConnCheck).
func (s *Store) lockSQL(ctx context.Context) (string, error) {
	return s.connCheck.Lock(ctx, &s.sql, s.connectionCheck)
}

// connectionCheck asks the server, in a transaction it rolls back, whether
// it has client_connection_check_interval (see pgschema.ConnectionCheck).
func (s *Store) connectionCheck(ctx context.Context) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	return pgschema.ConnectionCheck(ctx, querier{tx})
}

// DB returns the database the store uses.
func (s *Store) DB() *sql.DB { return s.db }

// hashLockKey is pgstore's advisory lock key of (scope, key) on the
// store's table, so that pgstore and sqldb exclude each other on a key.
func (s *Store) hashLockKey(scope, key string) int64 {
	return pgschema.LockKey(s.names.Table, scope, key)
}

// Begin implements idem.Store.
//
// It begins a transaction with BEGIN ISOLATION LEVEL READ COMMITTED, then
// tries the key's advisory lock and reads the record with one call of the
// begin function of migration 3 (see claim), whose read's snapshot sees
// every record committed before the lock was granted. With Config.ReplayProbe, or with Config.ProbeDB when db
// has no idle connection, a probe outside any transaction answers a replay
// or an in-flight refusal first (see probe).
//
// The transaction is begun detached from ctx's cancellation, so that the
// Guard can commit a work that succeeded after its caller gave up
// (docs/POSTGRES.md, "Cancellation"); until Begin returns, the end of ctx
// still interrupts it.
func (s *Store) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if rec, done, err := s.probe(ctx, p); done || err != nil {
		return rec, nil, err
	}
	lock, err := s.lockSQL(ctx)
	if err != nil {
		return nil, nil, unavailable("begin: connection check", ctxCause(ctx, err))
	}
	// database/sql rolls a transaction back by itself when the context
	// given to BeginTx ends, and the Guard commits a work that succeeded
	// even after the caller's ctx has ended: the transaction's context is
	// detached from ctx and ended by the Tx. Until Begin returns, the end
	// of ctx cancels it, so that a wait for a connection or a BEGIN still
	// obeys the caller's deadline.
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	tx, err := s.db.BeginTx(tctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		stop()
		cancel()
		return nil, nil, unavailable("begin", ctxCause(ctx, err))
	}
	end := func() {
		stop()
		rollback(tx, cancel)
	}
	locked, txStart, rec, err := s.claim(ctx, tx, lock, p)
	if pgschema.IsUndefinedFunction(err) {
		// The table's migrations stopped before the begin function
		// (SkipMigrate): from now on, two statements, for this call and
		// every other that found it missing meanwhile. The two
		// statements call no function of the table, so this retries once.
		s.noBeginFunc.Store(true)
		end()
		return s.Begin(ctx, p)
	}
	if err != nil {
		end()
		if pgschema.IsMissingSetting(err) {
			s.connCheck.Forget()
		}
		return nil, nil, unavailable("begin: lock", ctxCause(ctx, err))
	}
	if rec, err := pgschema.Answer(rec, locked, p.Now); rec != nil || err != nil {
		end()
		return rec, nil, err
	}
	if !stop() {
		// ctx ended meanwhile: the transaction's context has been
		// cancelled and database/sql is rolling it back.
		rollback(tx, cancel)
		return nil, nil, unavailable("begin", context.Cause(ctx))
	}
	// An expired record of the key must be deleted before the insert;
	// when there was none, nobody can write one while this transaction
	// holds the key's lock, and the DELETE is skipped.
	return nil, &Tx{store: s, tx: tx, cancel: cancel, scope: p.Scope, key: p.Key, expiredRow: rec != nil, txStart: txStart}, nil
}

// probe answers Begin from outside any transaction when it can: a live
// record is returned (done), a key whose lock is held is refused. It runs
// on db with Config.ReplayProbe, and on Config.ProbeDB whenever db has no
// idle connection and may open no more, so that a replay or a refusal
// never waits behind the works that hold db. The lock is tried and the
// record read in one statement, whose implicit transaction releases the
// lock as soon as the statement ends. Its read may have taken its snapshot
// before the lock, so a free key with no live record is never decided
// here: Begin then goes through the transaction.
//
// A failure on ProbeDB is not the answer: Begin goes on and waits for db,
// unless ctx has ended.
func (s *Store) probe(ctx context.Context, p *idem.BeginParams) (*idem.Record, bool, error) {
	target := s.db
	reserved := s.cfg.ProbeDB != nil && starved(s.db.Stats())
	switch {
	case reserved:
		target = s.cfg.ProbeDB
	case !s.cfg.ReplayProbe:
		return nil, false, nil
	}
	row := target.QueryRowContext(ctx, s.sql.Probe, s.lockKey(p.Scope, p.Key), p.Scope, p.Key)
	locked, rec, err := pgschema.ScanProbe(row, p.Scope, p.Key)
	if err != nil {
		if reserved && ctx.Err() == nil {
			return nil, false, nil
		}
		return nil, false, unavailable("begin: probe", err)
	}
	rec, err = pgschema.Answer(rec, locked, p.Now)
	return rec, rec != nil || err != nil, err
}

// starved reports whether a database in the state st makes a statement
// wait for a connection: none idle, and no room for a new one.
func starved(st sql.DBStats) bool {
	return st.MaxOpenConnections > 0 && st.Idle == 0 && st.OpenConnections >= st.MaxOpenConnections
}

// Lookup implements idem.Inspector.
func (s *Store) Lookup(ctx context.Context, p *idem.LookupParams) (*idem.Record, error) {
	rec, err := pgschema.ScanRecord(s.db.QueryRowContext(ctx, s.sql.Select, p.Scope, p.Key), p.Scope, p.Key)
	if err != nil {
		return nil, unavailable("lookup", err)
	}
	if rec == nil {
		return nil, idem.ErrNotFound
	}
	return rec, nil
}

// DeleteExpired implements idem.ExpiredDeleter. Each call is one short
// statement that deletes at most p.Limit rows found through the index on
// expires_at, re-checking expires_at on the row it deletes.
func (s *Store) DeleteExpired(ctx context.Context, p *idem.DeleteExpiredParams) (int, error) {
	if p.Limit <= 0 {
		return 0, nil
	}
	res, err := s.db.ExecContext(ctx, s.sql.Sweep, p.Now, p.Limit)
	if err != nil {
		return 0, unavailable("delete expired", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, unavailable("delete expired", err)
	}
	return int(n), nil
}

package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is an idem.Store on PostgreSQL, and an idem.LeasedTxStore for
// leased mode (see docs/POSTGRES.md, "Leased mode"). It is safe for
// concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	owned bool // Open created pool; Close closes it
	cfg   Config
	names pgschema.Names
	sql   pgschema.Statements // built once from names

	leased pgschema.LeasedStatements // built once from names
	admin  pgschema.AdminStatements  // built once from names

	connCheck pgschema.ConnCheck
	probes    reserve // the connections of Config.ProbeConns

	notifyOnce sync.Once
	notify     *notifier // of the outbox, once a transaction staged messages

	// lockKey is replaced by tests to force hash collisions.
	lockKey func(scope, key string) int64
	// beginFunc, set by benchmarks only, makes Begin call the begin
	// function of migration 3 instead of the lock and the read.
	beginFunc bool
}

var (
	_ idem.Store          = (*Store)(nil)
	_ idem.Inspector      = (*Store)(nil)
	_ idem.ExpiredDeleter = (*Store)(nil)
)

// New returns a Store whose records live in pool's database. A nil cfg
// means defaults. When cfg.Schema is empty, New asks a connection of pool
// for its current_schema(). Unless cfg.SkipMigrate is set, New applies
// the migrations (see Migrate). A pool that reaches the server through a
// connection pooler must not cache prepared statements (pgx's default):
// New then fails with ErrPoolerStatementCache. The caller keeps ownership of pool; Close
// releases what the store opened itself.
func New(ctx context.Context, pool *pgxpool.Pool, cfg *Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: New: pool is nil")
	}
	c, set, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkPooler(ctx, pool); err != nil {
		return nil, err
	}
	if err := set.Resolve(ctx, querier{pool}, "pgstore"); err != nil {
		return nil, err
	}
	c.Schema = set.Schema
	n := pgschema.NewNames(c.Schema, c.Table)
	s := &Store{
		pool: pool, cfg: c, names: n,
		sql:    pgschema.NewStatements(n, set.IdleInTransactionTimeout),
		leased: pgschema.NewLeasedStatements(n, set.IdleInTransactionTimeout),
		admin:  pgschema.NewAdminStatements(n),
	}
	s.probes.conns = int32(c.ProbeConns)
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
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return pgschema.ConnectionCheck(ctx, querier{tx})
}

// Open connects a new pool to the database named by connString (a URL or
// key=value DSN, see pgxpool.ParseConfig; pool_max_conns sizes the pool)
// and returns a Store over it that owns the pool: Close closes it.
//
// When connString sets no default_query_exec_mode and the server is
// reached through a connection pooler (PgBouncer in transaction or
// session pooling), the pool uses pgx.QueryExecModeExec, which prepares
// no named statement (docs/POSTGRES.md, "PgBouncer").
func Open(ctx context.Context, connString string, cfg *Config) (*Store, error) {
	pool, err := openPool(ctx, connString)
	if err != nil {
		return nil, unavailable("open", err)
	}
	s, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// Close closes the connections reserved for probes (Config.ProbeConns),
// and the pool if Open created it; a pool passed to New is left to its
// owner. Close waits for the connections to be returned.
func (s *Store) Close() error {
	s.probes.close()
	s.notifyOnce.Do(func() {}) // none starts after Close
	if s.notify != nil {
		s.notify.close()
	}
	if s.owned {
		s.pool.Close()
	}
	return nil
}

// Pool returns the pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// hashLockKey is the advisory lock key of (scope, key): FNV-1a 64 over the
// qualified table name, scope and key, each prefixed by its length so that
// no two triples share an input (pgschema.LockKey, which pgstore/sqldb
// uses too, so that the two stores exclude each other on one table). It
// only ever locks; what a request is answered is decided by the stored
// (scope, key), so a collision costs a spurious ErrInFlight and nothing
// else.
func (s *Store) hashLockKey(scope, key string) int64 {
	return pgschema.LockKey(s.names.Table, scope, key)
}

// Begin implements idem.Store.
//
// It sends BEGIN ISOLATION LEVEL READ COMMITTED, pg_try_advisory_xact_lock
// on the key's hash and the SELECT of the record as one pipelined batch:
// one round trip. The SELECT is a separate statement after the lock, so its
// snapshot sees every record committed before the lock was granted.
//
// With Config.ReplayProbe, or when the pool has no idle connection, a probe
// outside any transaction answers a replay or an in-flight refusal first
// (see probe).
func (s *Store) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if rec, done, err := s.probe(ctx, p); done || err != nil {
		return rec, nil, err
	}
	lock, err := s.lockSQL(ctx)
	if err != nil {
		return nil, nil, unavailable("begin: connection check", err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, unavailable("begin: acquire", err)
	}
	var (
		locked  bool
		txStart time.Time
		rec     *idem.Record
	)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if s.beginFunc {
		// A variant measured in docs/BENCHMARKS.md ("Variants of a first
		// execution"): the lock and the read in one statement, sqldb's
		// begin function.
		q, args := s.sql.BeginCall(s.lockKey(p.Scope, p.Key), p.Scope, p.Key, lock == s.sql.Lock)
		b.Queue(q, args...).QueryRow(func(row pgx.Row) error {
			var err error
			locked, txStart, rec, err = pgschema.ScanBegin(row, p.Scope, p.Key)
			return err
		})
	} else {
		b.Queue(lock, s.lockKey(p.Scope, p.Key)).QueryRow(func(row pgx.Row) error {
			return row.Scan(&locked, new(string), &txStart)
		})
		b.Queue(s.sql.Select, p.Scope, p.Key).QueryRow(func(row pgx.Row) error {
			r, err := pgschema.ScanRecord(row, p.Scope, p.Key)
			rec = r
			return err
		})
	}
	br := conn.Conn().SendBatch(ctx, b)
	ptx := br.Tx()
	err = br.Close()
	if err != nil {
		endConn(ctx, conn)
		if pgschema.IsMissingSetting(err) {
			s.connCheck.Forget()
		}
		return nil, nil, unavailable("begin", err)
	}
	if rec, err := pgschema.Answer(rec, locked, p.Now); rec != nil || err != nil {
		endConn(ctx, conn)
		return rec, nil, err
	}
	// An expired record of the key must be deleted before the insert;
	// when there was none, nobody can write one while this transaction
	// holds the key's lock, and the DELETE is skipped.
	t := &Tx{store: s, conn: conn, scope: p.Scope, key: p.Key, expiredRow: rec != nil, txStart: txStart}
	t.handle = &handle{tx: ptx, ended: &t.ended, owned: errGuardOwned}
	return nil, t, nil
}

// probe answers Begin from outside any transaction when it can: a live
// record is returned (done), a key whose lock is held is refused. It runs
// on the pool with Config.ReplayProbe, and on the reserved connections
// whenever the pool has none idle, so that a replay or a refusal never
// waits behind the works that hold the pool. The pipelined pair runs in
// the implicit transaction of one Sync, so the lock is released as soon as
// it is taken; its answer is trusted only for a live record (final) or a
// held lock, never to call a key free.
//
// A failure of the reserved connections (the server refuses one more, say)
// is not the answer: Begin goes on and waits for the pool, unless ctx has
// ended.
func (s *Store) probe(ctx context.Context, p *idem.BeginParams) (*idem.Record, bool, error) {
	var target interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
	}
	reserved := s.probes.conns > 0 && starved(s.pool.Stat())
	switch {
	case reserved:
		pool, err := s.probes.get(s.pool)
		if err != nil {
			return nil, false, nil
		}
		target = pool
	case s.cfg.ReplayProbe:
		target = s.pool
	default:
		return nil, false, nil
	}
	var (
		locked bool
		rec    *idem.Record
	)
	b := &pgx.Batch{}
	b.Queue(s.sql.TryLock, s.lockKey(p.Scope, p.Key)).QueryRow(func(row pgx.Row) error {
		return row.Scan(&locked)
	})
	b.Queue(s.sql.Select, p.Scope, p.Key).QueryRow(func(row pgx.Row) error {
		r, err := pgschema.ScanRecord(row, p.Scope, p.Key)
		rec = r
		return err
	})
	if err := target.SendBatch(ctx, b).Close(); err != nil {
		if reserved && ctx.Err() == nil {
			return nil, false, nil
		}
		return nil, false, unavailable("begin: probe", err)
	}
	rec, err := pgschema.Answer(rec, locked, p.Now)
	return rec, rec != nil || err != nil, err
}

// Lookup implements idem.Inspector. It reads leased mode's fields too (the
// lease, token, kind, attempts of a pending record).
func (s *Store) Lookup(ctx context.Context, p *idem.LookupParams) (*idem.Record, error) {
	rec, err := pgschema.ScanLeased(s.pool.QueryRow(ctx, s.leased.Select, p.Scope, p.Key))
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
// expires_at.
func (s *Store) DeleteExpired(ctx context.Context, p *idem.DeleteExpiredParams) (int, error) {
	if p.Limit <= 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, s.sql.Sweep, p.Now, p.Limit)
	if err != nil {
		return 0, unavailable("delete expired", err)
	}
	return int(tag.RowsAffected()), nil
}

// endConn rolls back whatever transaction conn is in and returns it to the
// pool. A connection that cannot be rolled back is closed, and the pool
// destroys it on release, so a broken connection never goes back into use.
func endConn(ctx context.Context, conn *pgxpool.Conn) {
	if !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			_ = conn.Conn().Close(ctx)
		}
		cancel()
	}
	conn.Release()
}

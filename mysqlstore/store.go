package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
)

// Store is an idem.Store on MySQL or MariaDB (InnoDB), through
// database/sql and go-sql-driver/mysql, and an idem.LeasedTxStore for
// leased mode. It is safe for concurrent use.
type Store struct {
	db         *sql.DB
	owned      bool // Open created db (and ProbeDB): Close closes them
	cfg        Config
	names      names
	setTimeout string      // the assignment of wait_timeout in the lock statement, or ""
	procs      atomic.Bool // the procedures exist and may be called: Begin and Commit CALL them (procedure.go)
	deferred   bool        // Open's connections: the CALLs begin and end the transaction (deferred.go)

	// commitHook, set by tests, runs before COMMIT, in its goroutine.
	commitHook func() error
}

var (
	_ idem.Store          = (*Store)(nil)
	_ idem.Inspector      = (*Store)(nil)
	_ idem.ExpiredDeleter = (*Store)(nil)
)

// New returns a Store whose records live in db's server, which must be
// MySQL or MariaDB with InnoDB (db opened with go-sql-driver/mysql). A nil
// cfg means defaults. When cfg.Database is empty, New asks a connection of
// db for its DATABASE(). Unless cfg.SkipMigrate is set, New applies the
// migrations (see Migrate). The caller keeps ownership of db and of
// cfg.ProbeDB.
func New(ctx context.Context, db *sql.DB, cfg *Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("mysqlstore: New: db is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c.ProbeDB == db {
		return nil, errors.New("mysqlstore: Config.ProbeDB must be a second handle on the server, not db itself")
	}
	var (
		name       sql.NullString
		autocommit int
		completion string
		sqlMode    string
	)
	if err := db.QueryRowContext(ctx, "SELECT DATABASE(), @@SESSION.autocommit, @@SESSION.completion_type, @@SESSION.sql_mode").Scan(&name, &autocommit, &completion, &sqlMode); err != nil {
		return nil, unavailable("new: current database", err)
	}
	// The store's single statements (the sweeper's DELETE, an outbox
	// claim's reads, Begin's read of the record) must commit on their
	// own, and each COMMIT must end its transaction: under autocommit=0
	// a DELETE would never commit and Begin would read an old snapshot,
	// and under completion_type CHAIN a COMMIT leaves a transaction open
	// on the pooled connection.
	if autocommit != 1 {
		return nil, errors.New("mysqlstore: the connections run with autocommit=0 (the DSN, or init_connect); the store needs autocommit=1: its single statements must commit on their own")
	}
	// Without a strict mode, a value too long for its column is cut
	// short with a warning and committed: a record whose headers cannot
	// be read back, after its effect committed.
	if !strictMode(sqlMode) {
		return nil, fmt.Errorf("mysqlstore: the connections run with sql_mode=%q, which has neither STRICT_TRANS_TABLES nor STRICT_ALL_TABLES; the store needs a strict mode: a value too long for its column must fail, not be cut short and committed", sqlMode)
	}
	if completion != "NO_CHAIN" {
		return nil, fmt.Errorf("mysqlstore: the connections run with completion_type=%s; the store needs NO_CHAIN (0): a COMMIT must end its transaction", completion)
	}
	if c.Database == "" {
		if !name.Valid || name.String == "" {
			return nil, errNoDatabase
		}
		c.Database = name.String
	}
	s := &Store{db: db, cfg: c, names: newNames(c.Database, c.Table)}
	if sec := c.idleSeconds(); sec > 0 {
		s.setTimeout = "SESSION wait_timeout = " + intLit(sec) + ", "
	}
	if !c.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	procs, err := s.hasProcedures(ctx)
	if err != nil {
		return nil, unavailable("new: procedures", err)
	}
	s.procs.Store(procs)
	return s, nil
}

// Open connects to the server named by dsn, a go-sql-driver/mysql DSN
// (user:password@tcp(host:port)/database?param=value, see mysql.ParseDSN),
// and returns a Store over it that owns the connections: Close closes
// them. Unless cfg.ProbeDB is set or cfg.ProbeConns is negative, it also
// opens the ProbeDB of cfg.ProbeConns connections. Idle connections are
// closed before the IdleTimeout that the store sets on them ends.
// Size the pool with Store.DB().SetMaxOpenConns.
func Open(ctx context.Context, dsn string, cfg *Config) (*Store, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: open: %w", err)
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: open: %w", err)
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(deferredConnector{connector})
	var probe *sql.DB
	if c.ProbeDB == nil && c.ProbeConns > 0 {
		probe = sql.OpenDB(connector)
		probe.SetMaxOpenConns(c.ProbeConns)
		probe.SetMaxIdleConns(c.ProbeConns)
		probe.SetConnMaxIdleTime(time.Minute)
		c.ProbeDB = probe
	}
	if c.IdleTimeout > 0 {
		db.SetConnMaxIdleTime(c.IdleTimeout / 2)
	}
	s, err := New(ctx, db, &c)
	if err != nil {
		_ = db.Close()
		if probe != nil {
			_ = probe.Close()
		}
		return nil, err
	}
	s.owned = true
	s.deferred = true
	return s, nil
}

// Close closes the connections if Open created them; a database passed to
// New is left to its owner.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	err := s.db.Close()
	if s.cfg.ProbeDB != nil {
		err = errors.Join(err, s.cfg.ProbeDB.Close())
	}
	return err
}

// DB returns the database the store uses. On the connections Open makes,
// a transaction that a deadlock rolled back refuses its later statements
// until its Commit or Rollback (docs/MYSQL.md).
func (s *Store) DB() *sql.DB { return s.db }

// Database returns the database that holds the store's tables.
func (s *Store) Database() string { return s.cfg.Database }

// Table returns the name of the records table.
func (s *Store) Table() string { return s.cfg.Table }

// Begin implements idem.Store.
//
// On a connection of its own, it tries the key's user-level lock
// (GET_LOCK with a timeout of 0: a held lock is refused at once, never
// waited for), setting the session's wait_timeout in the same statement
// (Config.IdleTimeout); then, in a statement of its own so that it sees
// every record committed before the lock was granted, it reads the
// record; then it begins the transaction and sets a savepoint, by which
// Commit knows the work left the transaction open. The lock is the
// session's, not the transaction's: the store releases it once the
// transaction has ended, and the server when the session ends (a crash, a
// cut connection, IdleTimeout).
//
// Where Migrate could create its procedures, the lock, the read and the
// savepoint are one CALL (procedure.go), and on Open's connections that
// CALL also begins the transaction (deferred.go).
//
// With Config.ReplayProbe, or with Config.ProbeDB when the database has
// no idle connection, a probe outside any transaction answers a replay or
// an in-flight refusal first (see probe).
//
// The transaction is begun detached from ctx's cancellation, so that the
// Guard can commit a work that succeeded after its caller gave up; until
// Begin returns, the end of ctx still interrupts it.
func (s *Store) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if rec, done, err := s.probe(ctx, p); done || err != nil {
		return rec, nil, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, nil, unavailable("begin: connection", ctxCause(ctx, err))
	}
	name := lockName(s.names, p.Scope, p.Key)
	if s.procs.Load() {
		return s.beginWithCall(ctx, conn, name, p)
	}
	return s.beginStatements(ctx, conn, name, p)
}

// beginStatements is Begin on a store without procedures, on conn: the
// lock and the read, then the transaction and its savepoint, one
// statement at a time.
func (s *Store) beginStatements(ctx context.Context, conn *sql.Conn, name string, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	locked, rec, err := s.lockAndRead(ctx, conn, name, p.Scope, p.Key)
	if err != nil {
		closeConn(conn)
		return nil, nil, unavailable("begin: lock", ctxCause(ctx, err))
	}
	if !locked {
		_ = conn.Close()
		if rec != nil && !rec.Expired(p.Now) {
			return rec, nil, nil
		}
		return nil, nil, idem.ErrInFlight
	}
	if rec != nil && !rec.Expired(p.Now) {
		releaseLock(ctx, conn, name)
		return rec, nil, nil
	}
	tx, cancel, err := openTx(ctx, conn, nil, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "SAVEPOINT "+savepoint)
		return err
	})
	if err != nil {
		closeConn(conn) // the server releases the lock with the session
		return nil, nil, unavailable("begin", ctxCause(ctx, err))
	}
	return nil, &Tx{store: s, conn: conn, tx: tx, cancel: cancel, lock: name, scope: p.Scope, key: p.Key, expiredRow: rec != nil}, nil
}

// openTx begins a transaction on conn and runs first in it.
//
// database/sql rolls a transaction back by itself when the context given
// to BeginTx ends, and the Guard commits a work that succeeded even after
// the caller's ctx has ended: the transaction's context is detached from
// ctx and ended by cancel. With d, BeginTx sends nothing: first's CALL
// begins the transaction (deferred.go). On an error, the transaction is
// rolled back and the caller closes conn.
func openTx(ctx context.Context, conn *sql.Conn, d *deferredTx, first func(*sql.Tx) error) (*sql.Tx, context.CancelFunc, error) {
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if d != nil {
		tctx = withDeferredTx(tctx, d)
	}
	// ctx is checked before and after, not watched: a rollback by
	// database/sql's goroutine in the middle of first would race with
	// it. first's statements run under ctx, which interrupts them.
	err := ctx.Err()
	var tx *sql.Tx
	if err == nil {
		tx, err = conn.BeginTx(tctx, nil)
	}
	if err == nil {
		if err = first(tx); err != nil {
			_ = tx.Rollback()
		}
	}
	if err == nil && ctx.Err() != nil {
		_ = tx.Rollback()
		err = context.Cause(ctx)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return tx, cancel, nil
}

// savepoint is the savepoint Begin sets and Commit releases: a work that
// ended the transaction (COMMIT, ROLLBACK, DDL) took it with it.
const savepoint = "idem_begin"

// lockAndRead tries the lock name on conn, then reads the record of
// (scope, key) in a statement that starts after the lock was granted.
func (s *Store) lockAndRead(ctx context.Context, conn *sql.Conn, name, scope, key string) (bool, *idem.Record, error) {
	if _, err := conn.ExecContext(ctx, "SET "+s.setTimeout+"@idem_locked = GET_LOCK("+hexLit(name)+", 0)"); err != nil {
		return false, nil, err
	}
	var locked sql.NullInt64
	var nr nullRecord
	err := conn.QueryRowContext(ctx, "SELECT @idem_locked, "+prefixed("r.")+" FROM (SELECT 1) AS d LEFT JOIN "+s.names.table+
		" AS r ON r.scope = "+hexLit(scope)+" AND r.`key` = "+hexLit(key)).Scan(append([]any{&locked}, nr.dest()...)...)
	if err != nil {
		return false, nil, err
	}
	rec, err := nr.record(scope, key)
	return locked.Int64 == 1, rec, err
}

// probe answers Begin from outside any transaction when it can: a live
// record is returned (done), a key whose lock is held is refused. It runs
// on the database with Config.ReplayProbe, and on Config.ProbeDB whenever
// the database has no idle connection and may open no more, so that a
// replay or a refusal never waits behind the works that hold the
// connections. It only tests the lock (IS_FREE_LOCK), and its answer is
// trusted only for a live record (final) or a held lock, never to call a
// key free.
//
// A failure on ProbeDB is not the answer: Begin goes on and waits for a
// connection, unless ctx has ended.
func (s *Store) probe(ctx context.Context, p *idem.BeginParams) (*idem.Record, bool, error) {
	target := s.db
	reserved := s.cfg.ProbeDB != nil && starved(s.db.Stats())
	switch {
	case reserved:
		target = s.cfg.ProbeDB
	case !s.cfg.ReplayProbe:
		return nil, false, nil
	}
	var free sql.NullInt64
	var nr nullRecord
	err := target.QueryRowContext(ctx, "SELECT IS_FREE_LOCK("+hexLit(lockName(s.names, p.Scope, p.Key))+"), "+prefixed("r.")+
		" FROM (SELECT 1) AS d LEFT JOIN "+s.names.table+" AS r ON r.scope = "+hexLit(p.Scope)+" AND r.`key` = "+hexLit(p.Key)).
		Scan(append([]any{&free}, nr.dest()...)...)
	if err != nil {
		if reserved && ctx.Err() == nil {
			return nil, false, nil
		}
		return nil, false, unavailable("begin: probe", err)
	}
	rec, err := nr.record(p.Scope, p.Key)
	switch {
	case err != nil:
		return nil, false, unavailable("begin: probe", err)
	case rec != nil && !rec.Expired(p.Now):
		return rec, true, nil
	case free.Valid && free.Int64 == 0:
		return nil, true, idem.ErrInFlight
	}
	return nil, false, nil
}

// starved reports whether a database in the state st makes a statement
// wait for a connection: none idle, and no room for a new one.
func starved(st sql.DBStats) bool {
	return st.MaxOpenConnections > 0 && st.Idle == 0 && st.OpenConnections >= st.MaxOpenConnections
}

// Lookup implements idem.Inspector. It reads leased mode's fields too.
func (s *Store) Lookup(ctx context.Context, p *idem.LookupParams) (*idem.Record, error) {
	rec, err := s.selectRecord(ctx, s.db, p.Scope, p.Key, "")
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
	res, err := s.db.ExecContext(ctx, "DELETE FROM "+s.names.table+" WHERE expires_at <= "+intLit(micros(p.Now))+
		" ORDER BY expires_at LIMIT "+intLit(int64(p.Limit)))
	if err != nil {
		return 0, unavailable("delete expired", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, unavailable("delete expired", err)
	}
	return int(n), nil
}

// queryer is a *sql.DB, *sql.Conn or *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// selectRecord reads the record of (scope, key), nil if there is none;
// suffix ends the statement (" FOR UPDATE", say).
func (s *Store) selectRecord(ctx context.Context, q queryer, scope, key, suffix string) (*idem.Record, error) {
	var nr nullRecord
	err := q.QueryRowContext(ctx, "SELECT "+recordColumns+" FROM "+s.names.table+" WHERE "+keyIs(scope, key)+suffix).Scan(nr.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return nr.record(scope, key)
}

// prefixed is recordColumns, each prefixed by p (a table alias and a dot).
func prefixed(p string) string {
	out := ""
	for i, c := range splitColumns {
		if i > 0 {
			out += ", "
		}
		out += p + c
	}
	return out
}

var splitColumns = []string{"fingerprint", "state", "status", "headers", "body", "created_at", "expires_at", "token", "lease_until", "kind", "input", "attempts", "last_error", "ttl_us"}

// nullRecord receives recordColumns, all NULL when a LEFT JOIN found no
// record.
type nullRecord struct {
	fingerprint, state, headers, body, kind, input, lastError []byte
	status, attempts                                          sql.NullInt64
	created, expires, token, leaseUntil, ttl                  sql.NullInt64
}

func (f *nullRecord) dest() []any {
	return []any{&f.fingerprint, &f.state, &f.status, &f.headers, &f.body, &f.created, &f.expires,
		&f.token, &f.leaseUntil, &f.kind, &f.input, &f.attempts, &f.lastError, &f.ttl}
}

// record is the record read, nil when there was none.
func (f *nullRecord) record(scope, key string) (*idem.Record, error) {
	if f.fingerprint == nil {
		return nil, nil
	}
	body := f.body
	if body == nil {
		body = []byte{}
	}
	r := &idem.Record{
		Scope:       scope,
		Key:         key,
		Fingerprint: string(f.fingerprint),
		State:       idem.State(f.state),
		Result:      idem.Result{Status: int(f.status.Int64), Body: body},
		CreatedAt:   fromMicros(f.created.Int64),
		ExpiresAt:   fromMicros(f.expires.Int64),
		Token:       f.token.Int64,
		Kind:        string(f.kind),
		Input:       f.input,
		Attempts:    int(f.attempts.Int64),
		LastError:   string(f.lastError),
		TTL:         time.Duration(f.ttl.Int64) * time.Microsecond,
	}
	if f.leaseUntil.Valid {
		r.LeaseUntil = fromMicros(f.leaseUntil.Int64)
	}
	if f.headers != nil {
		if err := json.Unmarshal(f.headers, &r.Result.Header); err != nil {
			return nil, fmt.Errorf("headers of %s: %w", recordName(scope, key), err)
		}
	}
	return r, nil
}

// headersLit is the headers column's literal: JSON, or NULL for none.
func headersLit(h map[string][]string) (string, error) {
	if h == nil {
		return "NULL", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("headers: %w", err)
	}
	return hexLit(b), nil
}

// recordName names a record in an error by the digests of its scope and
// key (idem.KeyHash), which log lines may carry, never by the values.
func recordName(scope, key string) string {
	return "(scope_sha256 " + idem.KeyHash(scope) + ", key_sha256 " + idem.KeyHash(key) + ")"
}

// releaseTimeout bounds the statement that releases a key's lock.
const releaseTimeout = 5 * time.Second

// releaseLock releases the lock name held by conn's session and returns
// conn to the pool; a connection that cannot is closed, which releases it
// too.
func releaseLock(ctx context.Context, conn *sql.Conn, name string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := conn.ExecContext(rctx, "DO RELEASE_LOCK("+hexLit(name)+")"); err != nil {
		closeConn(conn)
		return
	}
	_ = conn.Close()
}

// closeConn closes conn's connection instead of returning it to the pool:
// the server then ends the session, which rolls back its transaction and
// releases its locks.
func closeConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// ctxCause prefers the cause of ctx's end to the error it provoked.
func ctxCause(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn)) {
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	return err
}

// strictMode reports whether the sql_mode mode makes InnoDB refuse a value
// too long for its column.
func strictMode(mode string) bool {
	for _, m := range strings.Split(mode, ",") {
		if m == "STRICT_TRANS_TABLES" || m == "STRICT_ALL_TABLES" {
			return true
		}
	}
	return false
}

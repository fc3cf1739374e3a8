package pgstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/idemkit/idem"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is an idem.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	owned  bool // Open created pool; Close closes it
	cfg    Config
	names  names
	lockNS []byte // the qualified table name, hashed into every lock key

	// SQL built once from names.
	selectSQL, deleteSQL, insertSQL, sweepSQL string

	// lockKey is replaced by tests to force hash collisions.
	lockKey func(scope, key string) int64
}

var (
	_ idem.Store          = (*Store)(nil)
	_ idem.Inspector      = (*Store)(nil)
	_ idem.ExpiredDeleter = (*Store)(nil)
)

// New returns a Store whose records live in pool's database. A nil cfg
// means defaults. Unless cfg.SkipMigrate is set, New applies the
// migrations first (see Migrate). The caller keeps ownership of pool.
func New(ctx context.Context, pool *pgxpool.Pool, cfg *Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: New: pool is nil")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n := newNames(c.Schema, c.Table)
	s := &Store{pool: pool, cfg: c, names: n, lockNS: []byte(n.table)}
	s.lockKey = s.hashLockKey
	s.selectSQL = `SELECT fingerprint, state, status, headers, body, created_at, expires_at FROM ` + n.table + ` WHERE scope = $1 AND key = $2`
	// Only an expired row is ever deleted before the insert; a live one
	// stays and makes the insert fail on the primary key.
	s.deleteSQL = `DELETE FROM ` + n.table + ` WHERE scope = $1 AND key = $2 AND expires_at <= $3`
	s.insertSQL = `INSERT INTO ` + n.table + ` (scope, key, fingerprint, state, status, headers, body, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	// The outer expires_at test is re-checked on the newest row version
	// if a row changed after the inner SELECT: never delete a live row.
	s.sweepSQL = `DELETE FROM ` + n.table + ` WHERE ctid = ANY (ARRAY (SELECT ctid FROM ` + n.table + ` WHERE expires_at <= $1 LIMIT $2)) AND expires_at <= $1`
	if !c.SkipMigrate {
		if err := s.Migrate(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Open connects a new pool to the database named by connString (a URL or
// key=value DSN, see pgxpool.ParseConfig) and returns a Store over it that
// owns the pool: Close closes it.
func Open(ctx context.Context, connString string, cfg *Config) (*Store, error) {
	pool, err := pgxpool.New(ctx, connString)
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

// Close closes the pool if Open created it; a pool passed to New is left
// to its owner. Close waits for the pool's connections to be returned.
func (s *Store) Close() error {
	if s.owned {
		s.pool.Close()
	}
	return nil
}

// Pool returns the pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// hashLockKey is the advisory lock key of (scope, key): FNV-1a 64 over the
// qualified table name, scope and key, each prefixed by its length so that
// no two triples share an input. It only ever locks; what a request is
// answered is decided by the stored (scope, key), so a collision costs a
// spurious ErrInFlight and nothing else.
func (s *Store) hashLockKey(scope, key string) int64 {
	h := fnv.New64a()
	var n [4]byte
	for _, part := range [][]byte{s.lockNS, []byte(scope), []byte(key)} {
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return int64(h.Sum64())
}

// Begin implements idem.Store.
//
// It sends BEGIN ISOLATION LEVEL READ COMMITTED, pg_try_advisory_xact_lock
// on the key's hash and the SELECT of the record as one pipelined batch:
// one round trip. The SELECT is a separate statement after the lock, so its
// snapshot sees every record committed before the lock was granted.
func (s *Store) Begin(ctx context.Context, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	if s.cfg.ReplayProbe {
		rec, done, err := s.probe(ctx, p)
		if done || err != nil {
			return rec, nil, err
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, unavailable("begin: acquire", err)
	}
	var (
		locked bool
		rec    *idem.Record
	)
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	b.Queue(`SELECT pg_try_advisory_xact_lock($1)`, s.lockKey(p.Scope, p.Key)).QueryRow(func(row pgx.Row) error {
		return row.Scan(&locked)
	})
	b.Queue(s.selectSQL, p.Scope, p.Key).QueryRow(func(row pgx.Row) error {
		r, err := scanRecord(row, p.Scope, p.Key)
		rec = r
		return err
	})
	br := conn.Conn().SendBatch(ctx, b)
	ptx := br.Tx()
	err = br.Close()
	if err != nil {
		endConn(ctx, conn)
		return nil, nil, unavailable("begin", err)
	}
	// A committed live record is final: it is the answer whether or not
	// the lock was granted.
	if rec != nil && !rec.Expired(p.Now) {
		endConn(ctx, conn)
		return rec, nil, nil
	}
	if !locked {
		endConn(ctx, conn)
		return nil, nil, idem.ErrInFlight
	}
	// An expired record of the key must be deleted before the insert;
	// when there was none, nobody can write one while this transaction
	// holds the key's lock, and the DELETE is skipped.
	t := &Tx{store: s, conn: conn, scope: p.Scope, key: p.Key, expiredRow: rec != nil}
	t.handle = &handle{tx: ptx, owner: t}
	return nil, t, nil
}

// probe answers Begin from outside any transaction when it can: a live
// record is returned, a key whose lock is held is refused. The pipelined
// pair runs in the implicit transaction of one Sync, so the lock is
// released as soon as it is taken.
func (s *Store) probe(ctx context.Context, p *idem.BeginParams) (*idem.Record, bool, error) {
	var (
		locked bool
		rec    *idem.Record
	)
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_try_advisory_xact_lock($1)`, s.lockKey(p.Scope, p.Key)).QueryRow(func(row pgx.Row) error {
		return row.Scan(&locked)
	})
	b.Queue(s.selectSQL, p.Scope, p.Key).QueryRow(func(row pgx.Row) error {
		r, err := scanRecord(row, p.Scope, p.Key)
		rec = r
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, false, unavailable("begin: probe", err)
	}
	switch {
	case rec != nil && !rec.Expired(p.Now):
		return rec, true, nil
	case !locked:
		return nil, true, idem.ErrInFlight
	}
	return nil, false, nil
}

// Lookup implements idem.Inspector.
func (s *Store) Lookup(ctx context.Context, p *idem.LookupParams) (*idem.Record, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, s.selectSQL, p.Scope, p.Key), p.Scope, p.Key)
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
	tag, err := s.pool.Exec(ctx, s.sweepSQL, p.Now, p.Limit)
	if err != nil {
		return 0, unavailable("delete expired", err)
	}
	return int(tag.RowsAffected()), nil
}

// scanRecord reads one row of selectSQL; no row is a nil record.
func scanRecord(row pgx.Row, scope, key string) (*idem.Record, error) {
	var (
		rec     = idem.Record{Scope: scope, Key: key}
		state   string
		headers []byte
	)
	err := row.Scan(&rec.Fingerprint, &state, &rec.Result.Status, &headers, &rec.Result.Body, &rec.CreatedAt, &rec.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec.State = idem.State(state)
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.ExpiresAt = rec.ExpiresAt.UTC()
	if headers != nil {
		if err := json.Unmarshal(headers, &rec.Result.Header); err != nil {
			return nil, fmt.Errorf("headers of (%q, %q): %w", scope, key, err)
		}
	}
	return &rec, nil
}

// encodeHeaders is the jsonb value of h; nil stays NULL.
func encodeHeaders(h map[string][]string) ([]byte, error) {
	if h == nil {
		return nil, nil
	}
	return json.Marshal(h)
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

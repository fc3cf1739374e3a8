package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Config configures a Store. The zero value, and a nil *Config, mean
// defaults.
type Config struct {
	// Synchronous is SQLite's synchronous level: "FULL" or "NORMAL" (see
	// the package documentation for what each risks). Defaults to "FULL".
	Synchronous string

	// BusyTimeout is how long a write waits for the database's write lock
	// (held by another process, or by this one's writer slot) before the
	// call fails with idem.ErrUnavailable. Defaults to 5 seconds.
	BusyTimeout time.Duration

	// MaxOpenConns bounds the connection pool. Defaults to 8.
	MaxOpenConns int
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	switch strings.ToUpper(out.Synchronous) {
	case "":
		out.Synchronous = "FULL"
	case "FULL", "NORMAL":
		out.Synchronous = strings.ToUpper(out.Synchronous)
	default:
		return out, fmt.Errorf("sqlitestore: Config.Synchronous must be FULL or NORMAL, got %q", out.Synchronous)
	}
	if out.BusyTimeout < 0 {
		return out, fmt.Errorf("sqlitestore: Config.BusyTimeout must not be negative, got %s", out.BusyTimeout)
	}
	if out.BusyTimeout == 0 {
		out.BusyTimeout = 5 * time.Second
	}
	if out.MaxOpenConns < 0 {
		return out, fmt.Errorf("sqlitestore: Config.MaxOpenConns must not be negative, got %d", out.MaxOpenConns)
	}
	if out.MaxOpenConns == 0 {
		out.MaxOpenConns = 8
	}
	return out, nil
}

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

// TxFrom returns the *sql.Tx that the work passed to idem.Guard.Do runs in,
// and whether ctx carries one of this package's transactions.
func TxFrom(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := idem.TxFrom(ctx)
	if !ok {
		return nil, false
	}
	t, ok := tx.(*Tx)
	if !ok {
		return nil, false
	}
	return t.tx, true
}

const recordColumns = `fingerprint, state, status, header, body, created_at, expires_at`

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

const (
	selectRecord = `SELECT ` + recordColumns + ` FROM idem_records WHERE scope = ? AND key = ?`
	upsertRecord = `INSERT INTO idem_records (scope, key, ` + recordColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope, key) DO UPDATE SET
		  fingerprint = excluded.fingerprint, state = excluded.state,
		  status = excluded.status, header = excluded.header, body = excluded.body,
		  created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE idem_records.expires_at <= ?`
)

// prepare prepares the statements of the hot path once.
func (s *Store) prepare(ctx context.Context) error {
	var err error
	if s.read, err = s.db.PrepareContext(ctx, selectRecord); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	if s.upsert, err = s.db.PrepareContext(ctx, upsertRecord); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	if s.savepoint, err = s.db.PrepareContext(ctx, `SAVEPOINT idem_work`); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	if s.release, err = s.db.PrepareContext(ctx, `RELEASE idem_work`); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	return nil
}

// live returns the record for (scope, key) if it exists and has not expired
// at now.
func (s *Store) live(ctx context.Context, scope, key string, now time.Time) (*idem.Record, error) {
	rec, err := s.lookup(ctx, scope, key)
	if errors.Is(err, idem.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if rec.Expired(now) {
		return nil, nil
	}
	return rec, nil
}

func (s *Store) lookup(ctx context.Context, scope, key string) (*idem.Record, error) {
	var (
		rec            = idem.Record{Scope: scope, Key: key}
		header         []byte
		created, expis int64
	)
	err := s.read.QueryRowContext(ctx, scope, key).Scan(&rec.Fingerprint, &rec.State, &rec.Result.Status, &header, &rec.Result.Body, &created, &expis)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, idem.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read record: %w", err)
	}
	if len(header) > 0 {
		if err := json.Unmarshal(header, &rec.Result.Header); err != nil {
			return nil, fmt.Errorf("sqlitestore: decode recorded header: %w", err)
		}
	}
	rec.CreatedAt = time.Unix(0, created).UTC()
	rec.ExpiresAt = time.Unix(0, expis).UTC()
	return &rec, nil
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

// Tx is an open sqlitestore transaction holding one key's lock and the
// database's write lock.
type Tx struct {
	store *Store
	conn  *sql.Conn
	tx    *sql.Tx
	key   lockKey
	ended bool
}

// Handle implements idem.Tx; it returns the *sql.Tx.
func (t *Tx) Handle() any { return t.tx }

// Commit implements idem.Tx.
func (t *Tx) Commit(ctx context.Context, p *idem.CommitParams) error {
	if t.ended {
		return errors.New("sqlitestore: transaction already ended")
	}
	r := p.Record
	var header []byte
	if len(r.Result.Header) > 0 {
		var err error
		if header, err = json.Marshal(r.Result.Header); err != nil {
			t.end(false)
			return fmt.Errorf("sqlitestore: encode header: %w", err)
		}
	}
	body := r.Result.Body
	if body == nil {
		body = []byte{}
	}
	if _, err := t.tx.StmtContext(ctx, t.store.release).ExecContext(ctx); err != nil && !isBusy(err) {
		// SQLite looks the savepoint up before it checks for statements
		// still running (SQLITE_BUSY, "SQL statements in progress", when
		// the work left the rows of an INSERT … RETURNING open): BUSY
		// proves the savepoint, and so the transaction, is still there,
		// and COMMIT releases it. Anything else means it is gone.
		t.end(false)
		return fmt.Errorf("sqlitestore: the transaction ended under the work (a statement failed or was interrupted and SQLite rolled everything back, or the work ended it): %w", err)
	}
	res, err := t.tx.StmtContext(ctx, t.store.upsert).ExecContext(ctx,
		r.Scope, r.Key, r.Fingerprint, string(idem.StateCompleted), r.Result.Status, header, body,
		r.CreatedAt.UnixNano(), r.ExpiresAt.UnixNano(), p.Now.UnixNano())
	if err != nil {
		t.end(false)
		if isConstraint(err) {
			return idem.ErrConflict
		}
		return fmt.Errorf("sqlitestore: write record: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.end(false)
		if err != nil {
			return fmt.Errorf("sqlitestore: write record: %w", err)
		}
		return idem.ErrConflict // a live record with this key exists
	}
	return t.end(true)
}

// Rollback implements idem.Tx.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.ended {
		return nil
	}
	return t.end(false)
}

// end commits or rolls back, then releases the writer slot and the key.
func (t *Tx) end(commit bool) error {
	t.ended = true
	var err error
	if commit {
		err = t.tx.Commit()
		if err != nil {
			_ = t.tx.Rollback()
			err = fmt.Errorf("sqlitestore: commit: %w", err)
		}
	} else if rerr := t.tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
		err = fmt.Errorf("sqlitestore: rollback: %w", rerr)
	}
	_ = t.conn.Close() // back to the pool
	t.store.file.releaseWriter()
	t.store.file.unlock(t.key)
	return err
}

func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

func isConstraint(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

package transfers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Database is where the ledger lives: SQLite or PostgreSQL, the same
// database as the idempotency records. Build one with SQLite or Postgres.
type Database struct {
	schema string
	lock   string // locks both accounts, in id order; returns how many exist and the balance of the second

	// hasMessageID counts the message_id column of transfers (0 or 1);
	// addMessageID adds it to a ledger created before it existed.
	hasMessageID, addMessageID string
	// migrationLock, if not empty, is the first statement of the
	// migration's transaction: it waits until no other migrates.
	migrationLock string

	pool    querier                                   // reads outside any transaction
	begin   func(ctx context.Context) (txn, error)    // a transaction of our own
	current func(ctx context.Context) (querier, bool) // the idem transaction, if any
}

// querier is what the ledger needs from a connection or a transaction. Both
// backends accept $N placeholders.
type querier interface {
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	queryRow(ctx context.Context, sql string, args ...any) scanner
	query(ctx context.Context, sql string, args ...any) (rows, error)
}

type scanner interface{ Scan(dest ...any) error }

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

type txn interface {
	querier
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
}

var errNoRows = errors.New("transfers: no rows")

// SQLite returns the ledger's database on the store's SQLite file.
func SQLite(store *sqlitestore.Store) *Database {
	db := store.DB()
	return &Database{
		schema:       sqliteSchema,
		hasMessageID: `SELECT count(*) FROM pragma_table_info('transfers') WHERE name = 'message_id'`,
		addMessageID: `ALTER TABLE transfers ADD COLUMN message_id TEXT`,
		// No lock statement: the store begins every transaction with
		// BEGIN IMMEDIATE (its _txlock), so the migration holds SQLite's
		// write lock from its start, and another migration's BEGIN waits
		// for it within the store's busy timeout.
		// SQLite serialises writers (BEGIN IMMEDIATE): reading is enough.
		lock: `SELECT count(*), coalesce(max(CASE WHEN id = $2 THEN balance END), 0) FROM accounts WHERE id IN ($1, $2)`,
		pool: sqlQ{db},
		begin: func(ctx context.Context) (txn, error) {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return nil, err
			}
			return sqlTxn{sqlQ{tx}, tx}, nil
		},
		current: func(ctx context.Context) (querier, bool) {
			if tx, ok := sqlitestore.TxFrom(ctx); ok {
				return sqlQ{tx}, true
			}
			// A leased local step's transaction (idem.Run.LocalStep)
			// shows the store's *sql.Tx as its Handle.
			if t, ok := idem.TxFrom(ctx); ok {
				if tx, ok := t.Handle().(*sql.Tx); ok {
					return sqlQ{tx}, true
				}
			}
			return nil, false
		},
	}
}

// Postgres returns the ledger's database on the store's PostgreSQL pool.
func Postgres(store *pgstore.Store) *Database {
	pool := store.Pool()
	return &Database{
		schema: postgresSchema,
		// 'transfers' resolves through search_path, as in every query.
		hasMessageID: `SELECT count(*) FROM pg_attribute WHERE attrelid = 'transfers'::regclass AND attname = 'message_id' AND NOT attisdropped`,
		addMessageID: `ALTER TABLE transfers ADD COLUMN IF NOT EXISTS message_id text`,
		// Unlocked, two CREATE TABLE IF NOT EXISTS of one table race in
		// the catalog, and one fails with a unique violation of pg_type.
		migrationLock: fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, migrationLockID),
		// Row locks in id order, so that A->B and B->A never deadlock.
		lock: `SELECT count(*), coalesce(max(CASE WHEN id = $2 THEN balance END), 0)
			FROM (SELECT id, balance FROM accounts WHERE id IN ($1, $2) ORDER BY id FOR UPDATE) locked`,
		pool: pgQ{pool},
		begin: func(ctx context.Context) (txn, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return nil, err
			}
			return pgTxn{pgQ{tx}, tx}, nil
		},
		current: func(ctx context.Context) (querier, bool) {
			tx, ok := pgstore.TxFrom(ctx)
			return pgQ{tx}, ok
		},
	}
}

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS accounts (
	id      TEXT PRIMARY KEY,
	balance INTEGER NOT NULL CHECK (balance >= 0)
);
CREATE TABLE IF NOT EXISTS transfers (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	src        TEXT    NOT NULL REFERENCES accounts (id),
	dst        TEXT    NOT NULL REFERENCES accounts (id),
	amount     INTEGER NOT NULL CHECK (amount > 0),
	created_at INTEGER NOT NULL,
	message_id TEXT
);
CREATE TABLE IF NOT EXISTS payouts (
	id                 INTEGER PRIMARY KEY AUTOINCREMENT,
	account            TEXT    NOT NULL REFERENCES accounts (id),
	amount             INTEGER NOT NULL CHECK (amount > 0),
	state              TEXT    NOT NULL CHECK (state IN ('pending', 'completed', 'declined')),
	provider_charge_id TEXT,
	created_at         INTEGER NOT NULL,
	op_key             TEXT
);`

const postgresSchema = `
CREATE TABLE IF NOT EXISTS accounts (
	id      TEXT PRIMARY KEY,
	balance BIGINT NOT NULL CHECK (balance >= 0)
);
CREATE TABLE IF NOT EXISTS transfers (
	id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	src        TEXT   NOT NULL REFERENCES accounts (id),
	dst        TEXT   NOT NULL REFERENCES accounts (id),
	amount     BIGINT NOT NULL CHECK (amount > 0),
	created_at BIGINT NOT NULL,
	message_id TEXT
);
CREATE TABLE IF NOT EXISTS payouts (
	id                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	account            TEXT   NOT NULL REFERENCES accounts (id),
	amount             BIGINT NOT NULL CHECK (amount > 0),
	state              TEXT   NOT NULL CHECK (state IN ('pending', 'completed', 'declined')),
	provider_charge_id TEXT,
	created_at         BIGINT NOT NULL,
	op_key             TEXT
);`

// migrationLockID is the advisory lock that serialises the ledger's
// migrations on PostgreSQL: "transfer" in ASCII, apart from pgstore's
// migration lock ("idem-mig"), which its own migrations take.
const migrationLockID int64 = 0x7472616e73666572

// Migrate brings the ledger to the current schema, as New does.
func (db *Database) Migrate(ctx context.Context) error { return db.migrate(ctx) }

// migrate brings a ledger to the current schema in one transaction, which
// first takes the ledger's migration lock (Database.migrationLock), so
// that replicas started together on a new database migrate one at a time
// and the later ones find the tables made. migrateSteps says what it does.
func (db *Database) migrate(ctx context.Context) (err error) {
	tx, err := db.begin(ctx)
	if err != nil {
		return fmt.Errorf("begin the migration: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.rollback(context.WithoutCancel(ctx))
		}
	}()
	if db.migrationLock != "" {
		if _, err := tx.exec(ctx, db.migrationLock); err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
	}
	// The steps run on the transaction: a copy of db whose pool is tx.
	in := *db
	in.pool = tx
	if err := in.migrateSteps(ctx); err != nil {
		return err
	}
	if err := tx.commit(ctx); err != nil {
		return fmt.Errorf("commit the migration: %w", err)
	}
	return nil
}

// migrateSteps creates the tables if needed (payouts included, on a ledger
// created before them), adds the columns added since (migrateImport,
// migratePayoutOpKey), and adds transfers.message_id to a ledger created
// before it existed (the column is NULL for the transfers made until then,
// which came over HTTP), and the deposits and ledger_settings tables. The ALTER runs only when the column is missing,
// so that a restart does not queue for the table's exclusive lock behind
// running transfers.
func (db *Database) migrateSteps(ctx context.Context) error {
	if _, err := db.pool.exec(ctx, db.schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	var n int
	if err := db.pool.queryRow(ctx, db.hasMessageID).Scan(&n); err != nil {
		return fmt.Errorf("look for transfers.message_id: %w", err)
	}
	if n == 0 {
		if _, err := db.pool.exec(ctx, db.addMessageID); err != nil {
			return fmt.Errorf("add transfers.message_id: %w", err)
		}
	}
	if err := db.migrateImport(ctx); err != nil {
		return err
	}
	if err := db.migratePayoutOpKey(ctx); err != nil {
		return err
	}
	if err := db.migrateDeposits(ctx); err != nil {
		return err
	}
	return db.migrateSettings(ctx)
}

// database/sql adapter.

type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type sqlQ struct{ r sqlRunner }

func (q sqlQ) exec(ctx context.Context, s string, args ...any) (int64, error) {
	res, err := q.r.ExecContext(ctx, s, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQ) queryRow(ctx context.Context, s string, args ...any) scanner {
	return sqlRow{q.r.QueryRowContext(ctx, s, args...)}
}

func (q sqlQ) query(ctx context.Context, s string, args ...any) (rows, error) {
	r, err := q.r.QueryContext(ctx, s, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

type sqlRow struct{ *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	if err := r.Row.Scan(dest...); errors.Is(err, sql.ErrNoRows) {
		return errNoRows
	} else {
		return err
	}
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

type sqlTxn struct {
	sqlQ
	tx *sql.Tx
}

func (t sqlTxn) commit(context.Context) error   { return t.tx.Commit() }
func (t sqlTxn) rollback(context.Context) error { return t.tx.Rollback() }

// pgx adapter.

type pgRunner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

type pgQ struct{ r pgRunner }

func (q pgQ) exec(ctx context.Context, s string, args ...any) (int64, error) {
	tag, err := q.r.Exec(ctx, s, args...)
	return tag.RowsAffected(), err
}

func (q pgQ) queryRow(ctx context.Context, s string, args ...any) scanner {
	return pgRow{q.r.QueryRow(ctx, s, args...)}
}

func (q pgQ) query(ctx context.Context, s string, args ...any) (rows, error) {
	return q.r.Query(ctx, s, args...)
}

type pgRow struct{ pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	if err := r.Row.Scan(dest...); errors.Is(err, pgx.ErrNoRows) {
		return errNoRows
	} else {
		return err
	}
}

type pgTxn struct {
	pgQ
	tx pgx.Tx
}

func (t pgTxn) commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgTxn) rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

package projection

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/jackc/pgx/v5"
)

// database is where the read model lives: the store of the inbox that
// records the event ids, SQLite, PostgreSQL or MySQL, with its dialect's
// statements.
type database struct {
	schema []string
	sql    statements
	// exec runs a statement in the inbox's transaction that ctx
	// carries; ok is false when ctx carries none.
	exec func(ctx context.Context, sql string, args ...any) (ok bool, err error)
	// migrate runs the schema's statements outside any transaction.
	migrate func(ctx context.Context, stmts []string) error
	// query reads outside any transaction; each row is handed to scan.
	query func(ctx context.Context, sql string, scan func(s scanner) error, args ...any) error
}

type scanner interface{ Scan(dest ...any) error }

// errNotFound is a read that found no row.
var errNotFound = errors.New("projection: not found")

// statements are the read model's statements in one dialect.
type statements struct {
	// applied records an event: $1 transfer id, $2 event id.
	applied string
	// debit and credit add $2 to the debits or credits of account $1.
	debit, credit string
	// list reads the applied transfer ids in order; account reads the
	// totals of account $1.
	list, account string
}

// dollarStatements are the statements of SQLite and PostgreSQL ($N
// placeholders, ON CONFLICT).
var dollarStatements = statements{
	applied: `INSERT INTO projection_applied (transfer_id, event_id) VALUES ($1, $2)`,
	debit: `INSERT INTO projection_accounts (id, debits, credits) VALUES ($1, $2, 0)
		ON CONFLICT (id) DO UPDATE SET debits = projection_accounts.debits + excluded.debits`,
	credit: `INSERT INTO projection_accounts (id, debits, credits) VALUES ($1, 0, $2)
		ON CONFLICT (id) DO UPDATE SET credits = projection_accounts.credits + excluded.credits`,
	list:    `SELECT transfer_id FROM projection_applied ORDER BY seq`,
	account: `SELECT debits, credits FROM projection_accounts WHERE id = $1`,
}

// mysqlStatements are the same in MySQL's words (? placeholders, in
// order; ON DUPLICATE KEY UPDATE).
var mysqlStatements = statements{
	applied: `INSERT INTO projection_applied (transfer_id, event_id) VALUES (?, ?)`,
	debit:   `INSERT INTO projection_accounts (id, debits, credits) VALUES (?, ?, 0) ON DUPLICATE KEY UPDATE debits = debits + VALUES(debits)`,
	credit:  `INSERT INTO projection_accounts (id, debits, credits) VALUES (?, 0, ?) ON DUPLICATE KEY UPDATE credits = credits + VALUES(credits)`,
	list:    `SELECT transfer_id FROM projection_applied ORDER BY seq`,
	account: `SELECT debits, credits FROM projection_accounts WHERE id = ?`,
}

var sqliteSchema = []string{`
CREATE TABLE IF NOT EXISTS projection_applied (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	transfer_id INTEGER NOT NULL,
	event_id    TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS projection_accounts (
	id      TEXT    PRIMARY KEY,
	debits  INTEGER NOT NULL,
	credits INTEGER NOT NULL
);`}

var postgresSchema = []string{`
CREATE TABLE IF NOT EXISTS projection_applied (
	seq         bigserial PRIMARY KEY,
	transfer_id bigint NOT NULL,
	event_id    text   NOT NULL
);
CREATE TABLE IF NOT EXISTS projection_accounts (
	id      text   PRIMARY KEY,
	debits  bigint NOT NULL,
	credits bigint NOT NULL
);`}

// mysqlSchema is one statement per entry (go-sql-driver sends one at a
// time); account ids compare byte for byte, as the ledger's do.
var mysqlSchema = []string{
	`CREATE TABLE IF NOT EXISTS projection_applied (
	seq         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	transfer_id BIGINT       NOT NULL,
	event_id    VARCHAR(255) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
	`CREATE TABLE IF NOT EXISTS projection_accounts (
	id      VARCHAR(64) NOT NULL PRIMARY KEY,
	debits  BIGINT      NOT NULL,
	credits BIGINT      NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
}

func sqliteDatabase(store *sqlitestore.Store) *database {
	return sqlDatabase(store.DB(), sqliteSchema, dollarStatements, sqlitestore.TxFrom)
}

// mysqlDatabase is the read model on MySQL or MariaDB. CREATE TABLE IF NOT
// EXISTS is safe from two processes at once there, and MySQL commits each
// DDL statement on its own: no lock around the migration.
func mysqlDatabase(store *mysqlstore.Store) *database {
	return sqlDatabase(store.DB(), mysqlSchema, mysqlStatements, mysqlstore.TxFrom)
}

// sqlDatabase is the read model on a database/sql store: db for the
// migration and the reads, the *sql.Tx that txFrom finds in ctx for the
// writes.
func sqlDatabase(db *sql.DB, schema []string, st statements, txFrom func(context.Context) (*sql.Tx, bool)) *database {
	return &database{
		schema: schema,
		sql:    st,
		exec: func(ctx context.Context, q string, args ...any) (bool, error) {
			tx, ok := txFrom(ctx)
			if !ok {
				return false, nil
			}
			_, err := tx.ExecContext(ctx, q, args...)
			return true, err
		},
		migrate: func(ctx context.Context, stmts []string) error { return execEach(ctx, db, stmts) },
		query:   sqlQuery(db),
	}
}

// execEach runs stmts on db one after the other.
func execEach(ctx context.Context, db *sql.DB, stmts []string) error {
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// sqlQuery is database.query on a database/sql handle.
func sqlQuery(db *sql.DB) func(ctx context.Context, q string, scan func(scanner) error, args ...any) error {
	return func(ctx context.Context, q string, scan func(scanner) error, args ...any) error {
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return scanAll(rows, rows.Next, rows.Err, scan)
	}
}

func postgresDatabase(store *pgstore.Store) *database {
	pool := store.Pool()
	return &database{
		schema: postgresSchema,
		sql:    dollarStatements,
		exec: func(ctx context.Context, q string, args ...any) (bool, error) {
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return false, nil
			}
			_, err := tx.Exec(ctx, q, args...)
			return true, err
		},
		migrate: func(ctx context.Context, stmts []string) error {
			// One migration at a time: two CREATE TABLE IF NOT EXISTS
			// of one table race in the catalog.
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('idem projection migrate'))`); err != nil {
					return err
				}
				for _, q := range stmts {
					if _, err := tx.Exec(ctx, q); err != nil {
						return err
					}
				}
				return nil
			})
		},
		query: func(ctx context.Context, q string, scan func(scanner) error, args ...any) error {
			rows, err := pool.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			return scanAll(rows, rows.Next, rows.Err, scan)
		},
	}
}

// scanAll hands every row to scan; errNotFound when there is none.
func scanAll(s scanner, next func() bool, rowsErr func() error, scan func(scanner) error) error {
	n := 0
	for next() {
		if err := scan(s); err != nil {
			return err
		}
		n++
	}
	if err := rowsErr(); err != nil {
		return err
	}
	if n == 0 {
		return errNotFound
	}
	return nil
}

var _ scanner = (*sql.Rows)(nil)

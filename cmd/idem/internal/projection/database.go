package projection

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/sqlitestore"
	"github.com/jackc/pgx/v5"
)

// database is where the read model lives: the store of the inbox that
// records the event ids, SQLite or PostgreSQL. Both accept $N
// placeholders.
type database struct {
	schema string
	// exec runs a statement in the inbox's transaction that ctx
	// carries; ok is false when ctx carries none.
	exec func(ctx context.Context, sql string, args ...any) (ok bool, err error)
	// migrate runs schema outside any transaction.
	migrate func(ctx context.Context, sql string) error
	// query reads outside any transaction; each row is handed to scan.
	query func(ctx context.Context, sql string, scan func(s scanner) error, args ...any) error
}

type scanner interface{ Scan(dest ...any) error }

// errNotFound is a read that found no row.
var errNotFound = errors.New("projection: not found")

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS projection_applied (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	transfer_id INTEGER NOT NULL,
	event_id    TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS projection_accounts (
	id      TEXT    PRIMARY KEY,
	debits  INTEGER NOT NULL,
	credits INTEGER NOT NULL
);`

const postgresSchema = `
CREATE TABLE IF NOT EXISTS projection_applied (
	seq         bigserial PRIMARY KEY,
	transfer_id bigint NOT NULL,
	event_id    text   NOT NULL
);
CREATE TABLE IF NOT EXISTS projection_accounts (
	id      text   PRIMARY KEY,
	debits  bigint NOT NULL,
	credits bigint NOT NULL
);`

func sqliteDatabase(store *sqlitestore.Store) *database {
	db := store.DB()
	return &database{
		schema: sqliteSchema,
		exec: func(ctx context.Context, q string, args ...any) (bool, error) {
			tx, ok := sqlitestore.TxFrom(ctx)
			if !ok {
				return false, nil
			}
			_, err := tx.ExecContext(ctx, q, args...)
			return true, err
		},
		migrate: func(ctx context.Context, q string) error {
			_, err := db.ExecContext(ctx, q)
			return err
		},
		query: func(ctx context.Context, q string, scan func(scanner) error, args ...any) error {
			rows, err := db.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			return scanAll(rows, rows.Next, rows.Err, scan)
		},
	}
}

func postgresDatabase(store *pgstore.Store) *database {
	pool := store.Pool()
	return &database{
		schema: postgresSchema,
		exec: func(ctx context.Context, q string, args ...any) (bool, error) {
			tx, ok := pgstore.TxFrom(ctx)
			if !ok {
				return false, nil
			}
			_, err := tx.Exec(ctx, q, args...)
			return true, err
		},
		migrate: func(ctx context.Context, q string) error {
			// One migration at a time: two CREATE TABLE IF NOT EXISTS
			// of one table race in the catalog.
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('idem projection migrate'))`); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, q)
				return err
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

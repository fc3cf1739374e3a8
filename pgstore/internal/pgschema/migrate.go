package pgschema

import (
	"context"
	"fmt"
)

// MigrationLockID is the advisory lock that serializes migrations across
// processes and stores: the bytes of "idem-mig" read as a big-endian int64.
const MigrationLockID int64 = 0x6964656d2d6d6967

// migration is one versioned schema change. Its SQL is a template over the
// quoted names of the store.
type migration struct {
	version int
	sql     func(n Names) string
}

// migrations are applied in order, each at most once per table. Append;
// never edit a released one.
var migrations = []migration{
	{version: 1, sql: func(n Names) string {
		return `CREATE TABLE ` + n.Table + ` (
	scope       text        NOT NULL,
	key         text        NOT NULL,
	fingerprint text        NOT NULL,
	state       text        NOT NULL,
	status      integer     NOT NULL,
	headers     jsonb,
	body        bytea       NOT NULL,
	created_at  timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	CONSTRAINT ` + n.PKey + ` PRIMARY KEY (scope, key)
);
CREATE INDEX ` + n.ExpiresIdx + ` ON ` + n.Table + ` (expires_at)`
	}},
}

// Querier runs statements in the one transaction Migrate works in. Each
// store adapts its driver's transaction to it.
type Querier interface {
	// Exec runs a statement and discards its result.
	Exec(ctx context.Context, sql string, args ...any) error
	// QueryRow runs a statement that returns at most one row.
	QueryRow(ctx context.Context, sql string, args ...any) Row
}

// Row is one result row: pgx.Row and *sql.Row both are.
type Row interface {
	Scan(dest ...any) error
}

// Migrate applies, inside the transaction q runs in, the migrations that
// the table has not had yet. schema is the unquoted schema name. It first
// takes a transaction-scoped advisory lock on MigrationLockID, so that
// processes that start together, whichever store they run, apply them
// once. The caller commits, or rolls back on error.
func Migrate(ctx context.Context, q Querier, schema string, n Names) error {
	if err := q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, MigrationLockID); err != nil {
		return err
	}
	// Create the schema only when it is missing, so that a role without
	// CREATE on the database can use an existing one.
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if err := q.Exec(ctx, `CREATE SCHEMA `+n.Schema); err != nil {
			return err
		}
	}
	if err := q.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+n.Migrations+` (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return err
	}
	var current int
	if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+n.Migrations).Scan(&current); err != nil {
		return err
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		if err := q.Exec(ctx, m.sql(n)); err != nil {
			return fmt.Errorf("migration %d: %w", m.version, err)
		}
		if err := q.Exec(ctx, `INSERT INTO `+n.Migrations+` (version) VALUES ($1)`, m.version); err != nil {
			return err
		}
	}
	return nil
}

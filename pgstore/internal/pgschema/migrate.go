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
	// Leased mode (see LeasedStatements): the lease and fencing token of a
	// pending record, what a completer needs to finish it, and its
	// recovery points. The defaults are constants, so the new columns
	// cost no rewrite of the table, and an atomic record reads as one
	// with no lease. The partial index serves Abandoned and stays as
	// small as the pending records. A step's seq is an identity, so
	// steps read back in the order they were first saved.
	{version: 2, sql: func(n Names) string {
		return `ALTER TABLE ` + n.Table + `
	ADD COLUMN token       bigint  NOT NULL DEFAULT 0,
	ADD COLUMN lease_until timestamptz,
	ADD COLUMN kind        text    NOT NULL DEFAULT '',
	ADD COLUMN input       bytea,
	ADD COLUMN attempts    integer NOT NULL DEFAULT 0,
	ADD COLUMN last_error  text    NOT NULL DEFAULT '';
CREATE INDEX ` + n.PendingIdx + ` ON ` + n.Table + ` (lease_until) WHERE state = 'pending';
CREATE TABLE ` + n.Steps + ` (
	scope      text        NOT NULL,
	key        text        NOT NULL,
	name       text        NOT NULL,
	seq        bigint      GENERATED ALWAYS AS IDENTITY,
	output     bytea,
	created_at timestamptz NOT NULL,
	CONSTRAINT ` + n.StepsPKey + ` PRIMARY KEY (scope, key, name)
)`
	}},
	// 3: the begin function, for the stores that cannot pipeline the lock
	// and the read (begin_func.go).
	{version: 3, sql: beginFuncSQL},
	// 4: the TTL a leased record was claimed with, in microseconds, which
	// whoever completes it keeps (idem.Record.TTL). The default is a
	// constant (no rewrite), and 0, which the rows written before read as,
	// is "unknown": the completing engine's TTL applies.
	{version: 4, sql: func(n Names) string {
		return `ALTER TABLE ` + n.Table + ` ADD COLUMN ttl_us bigint NOT NULL DEFAULT 0`
	}},
	// 5: the audit log of idem.Admin (AdminStatements): one row per
	// change an operator made, written in the change's transaction.
	// before is the record as it was, as encoding/json writes an
	// idem.Record.
	{version: 5, sql: func(n Names) string {
		return `CREATE TABLE ` + n.Audit + ` (
	id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at     timestamptz NOT NULL,
	actor  text        NOT NULL,
	action text        NOT NULL,
	reason text        NOT NULL,
	scope  text        NOT NULL,
	key    text        NOT NULL,
	status integer     NOT NULL,
	before jsonb       NOT NULL
)`
	}},
	// 6: the outbox (outbox.go).
	{version: 6, sql: outboxSQL},
}

// LatestVersion is the version of the last migration: a table that has
// had them all has one row per version, 1 to LatestVersion, in its
// migration table.
func LatestVersion() int { return migrations[len(migrations)-1].version }

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

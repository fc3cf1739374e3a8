package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrationLockID is the advisory lock that serializes migrations across
// processes: the bytes of "idem-mig" read as a big-endian int64.
const migrationLockID int64 = 0x6964656d2d6d6967

// migration is one versioned schema change. Its SQL is a template over the
// quoted names of the store (see names).
type migration struct {
	version int
	sql     func(n names) string
}

// migrations are applied in order, each at most once per table. Append;
// never edit a released one.
var migrations = []migration{
	{version: 1, sql: func(n names) string {
		return `CREATE TABLE ` + n.table + ` (
	scope       text        NOT NULL,
	key         text        NOT NULL,
	fingerprint text        NOT NULL,
	state       text        NOT NULL,
	status      integer     NOT NULL,
	headers     jsonb,
	body        bytea       NOT NULL,
	created_at  timestamptz NOT NULL,
	expires_at  timestamptz NOT NULL,
	CONSTRAINT ` + n.pkey + ` PRIMARY KEY (scope, key)
);
CREATE INDEX ` + n.expiresIdx + ` ON ` + n.table + ` (expires_at)`
	}},
}

// names are the quoted identifiers a store uses.
type names struct {
	schema     string // "s"
	table      string // "s"."t"
	migrations string // "s"."t_migrations"
	pkey       string // "t_pkey"
	expiresIdx string // "t_expires_at_idx"
}

func newNames(schema, table string) names {
	return names{
		schema:     pgx.Identifier{schema}.Sanitize(),
		table:      pgx.Identifier{schema, table}.Sanitize(),
		migrations: pgx.Identifier{schema, table + "_migrations"}.Sanitize(),
		pkey:       pgx.Identifier{table + "_pkey"}.Sanitize(),
		expiresIdx: pgx.Identifier{table + "_expires_at_idx"}.Sanitize(),
	}
}

// Migrate applies the migrations that the store's table has not had yet,
// in one transaction. It is safe to call from several processes at once:
// the transaction first takes a transaction-scoped advisory lock on a fixed
// id, so one process applies the migrations and the others then find them
// applied. New calls it unless Config.SkipMigrate is set.
func (s *Store) Migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockID); err != nil {
			return err
		}
		// Create the schema only when it is missing, so that a role
		// without CREATE on the database can use an existing one.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, s.cfg.Schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+s.names.schema); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.names.migrations+` (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+s.names.migrations).Scan(&current); err != nil {
			return err
		}
		for _, m := range migrations {
			if m.version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql(s.names)); err != nil {
				return fmt.Errorf("migration %d: %w", m.version, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+s.names.migrations+` (version) VALUES ($1)`, m.version); err != nil {
				return err
			}
		}
		return nil
	})
	return unavailable("migrate", err)
}

package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations are applied in order; migration i brings the schema to
// version i+1. Never edit one that has shipped; append.
var migrations = []string{
	`CREATE TABLE idem_records (
		scope       TEXT    NOT NULL,
		key         TEXT    NOT NULL,
		fingerprint TEXT    NOT NULL,
		state       TEXT    NOT NULL,
		status      INTEGER NOT NULL,
		header      BLOB,
		body        BLOB    NOT NULL,
		created_at  INTEGER NOT NULL,
		expires_at  INTEGER NOT NULL,
		PRIMARY KEY (scope, key)
	) WITHOUT ROWID;
	CREATE INDEX idem_records_expires_at ON idem_records (expires_at);`,

	// 2: leased mode. A pending record keeps expires_at at
	// idem.PendingExpiresAt, so version 1's paths treat it as live.
	`ALTER TABLE idem_records ADD COLUMN token      INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE idem_records ADD COLUMN lease_until INTEGER;
	ALTER TABLE idem_records ADD COLUMN kind        TEXT    NOT NULL DEFAULT '';
	ALTER TABLE idem_records ADD COLUMN input       BLOB;
	ALTER TABLE idem_records ADD COLUMN attempts    INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE idem_records ADD COLUMN last_error  TEXT    NOT NULL DEFAULT '';
	CREATE INDEX idem_records_lease_until ON idem_records (lease_until) WHERE state = 'pending';
	CREATE TABLE idem_steps (
		scope      TEXT    NOT NULL,
		key        TEXT    NOT NULL,
		name       TEXT    NOT NULL,
		seq        INTEGER NOT NULL,
		output     BLOB,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (scope, key, name)
	) WITHOUT ROWID;`,

	// 3: the TTL a leased record was claimed with, in nanoseconds, which
	// whoever completes it keeps (idem.Record.TTL). 0, the default of the
	// rows written before, is "unknown": the engine's TTL applies.
	`ALTER TABLE idem_records ADD COLUMN ttl INTEGER NOT NULL DEFAULT 0;`,

	// 4: the audit log of idem.Admin (admin.go): one row per change an
	// operator made, written in the change's transaction. before is the
	// record as it was, as encoding/json writes an idem.Record.
	`CREATE TABLE idem_audit (
		id     INTEGER PRIMARY KEY AUTOINCREMENT,
		at     INTEGER NOT NULL,
		actor  TEXT    NOT NULL,
		action TEXT    NOT NULL,
		reason TEXT    NOT NULL,
		scope  TEXT    NOT NULL,
		key    TEXT    NOT NULL,
		status INTEGER NOT NULL,
		before BLOB    NOT NULL
	);`,
	// 5: the outbox (outbox.go).
	outboxSchema,
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

func (s *Store) migrate(ctx context.Context) error {
	if err := s.file.acquireWriter(ctx, s.cfg.BusyTimeout); err != nil {
		return err
	}
	defer s.file.releaseWriter()
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: one migrator at a time
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS idem_schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT version FROM idem_schema_version`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO idem_schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("sqlitestore: migrate: %w", err)
		}
	case err != nil:
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("sqlitestore: database schema version %d is newer than this package's %d", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("sqlitestore: migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE idem_schema_version SET version = ?`, len(migrations)); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return tx.Commit()
}

// checkSchema checks, writing nothing, that the file holds this package's
// schema version.
func (s *Store) checkSchema(ctx context.Context) error {
	var tables int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master
		WHERE type = 'table' AND name IN ('idem_schema_version', 'idem_records')`).Scan(&tables)
	if isNotADatabase(err) {
		return fmt.Errorf("%w: %s is not a SQLite database", ErrSchema, s.path)
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: Open: read schema: %w", err)
	}
	if tables < 2 {
		return fmt.Errorf("%w: %s has no idem tables (open it once for writing, without SkipMigrate, to create them)", ErrSchema, s.path)
	}
	var v int
	err = s.db.QueryRowContext(ctx, `SELECT version FROM idem_schema_version`).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlitestore: Open: read schema version: %w", err)
	}
	switch {
	case v < SchemaVersion:
		return fmt.Errorf("%w: %s holds schema version %d, older than this package's %d (open it once for writing, without SkipMigrate, to migrate it)", ErrSchema, s.path, v, SchemaVersion)
	case v > SchemaVersion:
		return fmt.Errorf("%w: %s holds schema version %d, newer than this package's %d (use a newer idem)", ErrSchema, s.path, v, SchemaVersion)
	}
	return nil
}

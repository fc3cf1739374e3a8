package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrateLockWait bounds the wait for another process's migrations.
const migrateLockWait = 60 * time.Second

// Migrate applies the migrations that the store's tables have not had
// yet. It is safe to call from several processes at once: it first takes
// a user-level lock (GET_LOCK) named after the table, on a connection of
// its own, so one process applies them and the others then find them
// applied. The lock is the session's: it is released when Migrate ends,
// or by the server when the connection is lost. New calls it unless
// Config.SkipMigrate is set.
//
// MySQL commits each DDL statement on its own: a migration is a few
// statements that can each run again (CREATE … IF NOT EXISTS), recorded
// in the "<Table>_migrations" table once all of them have run.
func (s *Store) Migrate(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return unavailable("migrate", err)
	}
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK("+hexLit(migrationLock(s.names))+", "+intLit(int64(migrateLockWait/time.Second))+")").Scan(&got)
	if err == nil && got.Int64 != 1 {
		err = fmt.Errorf("another process held the migration lock for %s", migrateLockWait)
	}
	if err != nil {
		closeConn(conn)
		return unavailable("migrate: lock", err)
	}
	err = s.migrate(ctx, conn)
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK("+hexLit(migrationLock(s.names))+")"); rerr != nil {
		closeConn(conn) // the server releases the lock with the session
		return unavailable("migrate", err)
	}
	_ = conn.Close()
	return unavailable("migrate", err)
}

func (s *Store) migrate(ctx context.Context, conn *sql.Conn) error {
	// Create the database only when it is missing, so that a user without
	// CREATE on the server can use an existing one.
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = "+hexLit(s.cfg.Database)).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := conn.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+s.names.database+" CHARACTER SET utf8mb4"); err != nil {
			return err
		}
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+s.names.migrations+` (
	version    INT    NOT NULL PRIMARY KEY,
	applied_at BIGINT NOT NULL
) ENGINE = InnoDB`); err != nil {
		return err
	}
	var current int
	if err := conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM "+s.names.migrations).Scan(&current); err != nil {
		return err
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		for _, stmt := range m.sql(s.names) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %d: %w", m.version, err)
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+s.names.migrations+" (version, applied_at) VALUES ("+
			intLit(int64(m.version))+", "+intLit(micros(time.Now()))+")"); err != nil {
			return err
		}
	}
	return s.createProcedures(ctx, conn)
}

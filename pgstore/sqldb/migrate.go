package sqldb

import (
	"context"
	"database/sql"

	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// Migrate applies the migrations that the store's table has not had yet,
// in one transaction. They are pgstore's migrations, recorded in the same
// "<Table>_migrations" table: a table created by either store is up to
// date for the other. It is safe to call from several processes at once,
// of either store: the transaction first takes a transaction-scoped
// advisory lock on a fixed id, so one process applies the migrations and
// the others then find them applied. New calls it unless
// Config.SkipMigrate is set.
func (s *Store) Migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return unavailable("migrate", err)
	}
	if err := pgschema.Migrate(ctx, querier{tx}, s.cfg.Schema, s.names); err != nil {
		_ = tx.Rollback()
		return unavailable("migrate", err)
	}
	return unavailable("migrate", tx.Commit())
}

// querier runs pgschema's statements on a *sql.DB or a *sql.Tx.
type querier struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	}
}

func (q querier) Exec(ctx context.Context, query string, args ...any) error {
	_, err := q.q.ExecContext(ctx, query, args...)
	return err
}

func (q querier) QueryRow(ctx context.Context, query string, args ...any) pgschema.Row {
	return q.q.QueryRowContext(ctx, query, args...)
}

package pgstore

import (
	"context"

	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Migrate applies the migrations that the store's table has not had yet,
// in one transaction. It is safe to call from several processes at once:
// the transaction first takes a transaction-scoped advisory lock on a fixed
// id, so one process applies the migrations and the others then find them
// applied. New calls it unless Config.SkipMigrate is set.
//
// The migrations are the ones pgstore/sqldb applies too: either store can
// create the table, and the other finds it up to date.
func (s *Store) Migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return pgschema.Migrate(ctx, querier{tx}, s.cfg.Schema, s.names)
	})
	return unavailable("migrate", err)
}

// querier runs pgschema's statements on a pgx pool or transaction.
type querier struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (q querier) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := q.q.Exec(ctx, sql, args...)
	return err
}

func (q querier) QueryRow(ctx context.Context, sql string, args ...any) pgschema.Row {
	return q.q.QueryRow(ctx, sql, args...)
}

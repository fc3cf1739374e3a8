package pgstore

import (
	"context"

	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SetLockKey replaces the lock-key hash of s, to force collisions.
func SetLockKey(s *Store, f func(scope, key string) int64) { s.lockKey = f }

// SetBeginFunc makes s claim keys with the begin function of migration 3.
func SetBeginFunc(s *Store, on bool) { s.beginFunc = on }

// Querier runs statements on q, a pool or a transaction, as the store's
// own code does.
func Querier(q interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) pgschema.Querier {
	return querier{q}
}

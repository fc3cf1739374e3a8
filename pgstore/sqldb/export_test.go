package sqldb

import (
	"context"
	"database/sql"

	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// SetLockKey replaces the lock-key hash of s, to force collisions.
func SetLockKey(s *Store, f func(scope, key string) int64) { s.lockKey = f }

// Querier runs statements on q, a *sql.DB or a *sql.Tx, as the store's own
// code does.
func Querier(q interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) pgschema.Querier {
	return querier{q}
}

// SetBeginFunc makes s claim keys with the begin function of migration 3
// (on, the default) or with two statements (off).
func SetBeginFunc(s *Store, on bool) { s.noBeginFunc.Store(!on) }

package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// unavailable wraps a failure of the database, the network or the pool so
// that it matches idem.ErrUnavailable and still unwraps to the driver's
// error (a *pgconn.PgError, a *pq.Error, driver.ErrBadConn, a net.Error,
// context.DeadlineExceeded, …).
func unavailable(op string, err error) error { return pgschema.Unavailable("sqldb", op, err) }

// ctxCause adds ctx's own error to err when ctx has ended and err does not
// already say so: a statement interrupted through the transaction's
// detached context only says "context canceled", or that the transaction
// is done, where the caller's deadline was the cause.
func ctxCause(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", context.Cause(ctx), err)
}

// Transient reports whether err is a fault that a later retry of the whole
// call may not meet again: the connection was lost or refused, the server
// is shutting down or starting, the pool could not hand out a connection in
// time, or the server aborted the transaction (serialization failure,
// deadlock, lock or statement timeout, too many connections). A false
// answer for an error matching idem.ErrUnavailable means a configuration or
// programming error (a missing table, a permission, a work that ended the
// transaction itself) that retries will not cure.
//
// It classifies server errors as pgstore's Transient does, by their
// SQLSTATE, read from any error in the chain that has a SQLState() string
// method: pgx's *pgconn.PgError (pgx/v5/stdlib) and lib/pq's *pq.Error
// both have it. A driver error without a SQLSTATE (driver.ErrBadConn, a
// network error, a timeout) is transient.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := pgschema.SQLState(err); !ok && errors.Is(err, sql.ErrTxDone) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		// The transaction was ended by someone else than the store: the
		// work committed or rolled back the *sql.Tx itself.
		return false
	}
	return pgschema.Transient(err)
}

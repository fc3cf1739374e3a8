package pgstore

import (
	"errors"
	"fmt"

	"github.com/idemkit/idem"
	"github.com/jackc/pgx/v5/pgconn"
)

// uniqueViolation is the SQLSTATE of a unique constraint violation.
const uniqueViolation = "23505"

// unavailable wraps a failure of the database, the network or the pool so
// that it matches idem.ErrUnavailable and still unwraps to the original
// (a *pgconn.PgError, a net.Error, context.DeadlineExceeded, …).
//
// Every failure is wrapped, not only the transient ones: a store that
// cannot do its job fails closed. Transient reports whether a retry may
// succeed.
func unavailable(op string, err error) error {
	if err == nil || errors.Is(err, idem.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: pgstore: %s: %w", idem.ErrUnavailable, op, err)
}

// Transient reports whether err is a fault that a later retry of the whole
// call may not meet again: the connection was lost or refused, the server
// is shutting down or starting, the pool could not hand out a connection in
// time, or the server aborted the transaction (serialization failure,
// deadlock, lock or statement timeout, too many connections). A false
// answer for an error matching idem.ErrUnavailable means a configuration or
// programming error (a missing table, a permission) that retries will not
// cure.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientCode(pgErr.Code)
	}
	// Anything that is not a server error is the network, the pool, a
	// timeout or a cancellation: none of them is permanent.
	return true
}

func transientCode(code string) bool {
	switch code {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03", // lock_not_available (lock_timeout)
		"57014", // query_canceled (statement_timeout, cancel request)
		"57P01", // admin_shutdown (pg_terminate_backend, fast shutdown)
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now (starting up, shutting down)
		"25P03": // idle_in_transaction_session_timeout
		return true
	}
	if len(code) < 2 {
		return false
	}
	switch code[:2] {
	case "08", // connection exception
		"53", // insufficient resources (too many connections, disk full)
		"58": // system error (I/O)
		return true
	}
	return false
}

// isUniqueViolation reports whether err is a unique constraint violation.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation
}

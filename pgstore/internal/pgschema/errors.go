package pgschema

import (
	"errors"
	"fmt"

	"github.com/idemkit/idem"
)

// Unavailable wraps a failure of the database, the network or the pool so
// that it matches idem.ErrUnavailable and still unwraps to the original
// (the driver's error, a net.Error, context.DeadlineExceeded, …). pkg and
// op say where it happened.
//
// Every failure is wrapped, not only the transient ones: a store that
// cannot do its job fails closed. Transient reports whether a retry may
// succeed.
func Unavailable(pkg, op string, err error) error {
	if err == nil || errors.Is(err, idem.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %s: %s: %w", idem.ErrUnavailable, pkg, op, err)
}

// UniqueViolation is the SQLSTATE of a unique constraint violation.
const UniqueViolation = "23505"

// sqlStater is an error that carries a PostgreSQL SQLSTATE: pgx's
// *pgconn.PgError has the method, and so has lib/pq's *pq.Error.
type sqlStater interface {
	SQLState() string
}

// SQLState returns the SQLSTATE of the first error in err's chain that
// carries one, and whether there is one.
func SQLState(err error) (string, bool) {
	var se sqlStater
	if !errors.As(err, &se) {
		return "", false
	}
	return se.SQLState(), true
}

// IsUniqueViolation reports whether err is a unique constraint violation.
func IsUniqueViolation(err error) bool {
	code, ok := SQLState(err)
	return ok && code == UniqueViolation
}

// Transient reports whether err is a fault that a later retry of the whole
// call may not meet again. An error that carries a SQLSTATE is judged by
// TransientCode. Anything else is the network, the pool, a timeout or a
// cancellation, none of them permanent, and is transient.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if code, ok := SQLState(err); ok {
		return TransientCode(code)
	}
	return true
}

// TransientCode reports whether a server error with this SQLSTATE may go
// away on a retry: connection loss, shutdown or start-up, a transaction
// aborted by the server (serialization failure, deadlock, lock or
// statement timeout), insufficient resources. Anything else (a missing
// table, a permission, a constraint) is a configuration or programming
// error that retries will not cure.
func TransientCode(code string) bool {
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

// IsOtherTx reports whether err is Statements.Insert's refusal to write a
// record outside the transaction Lock ran in: a not_null_violation (23502).
// The record's columns are otherwise never NULL.
func IsOtherTx(err error) bool {
	code, ok := SQLState(err)
	return ok && code == "23502"
}

package pgstore

import "github.com/idemkit/idem/pgstore/internal/pgschema"

// unavailable wraps a failure of the database, the network or the pool so
// that it matches idem.ErrUnavailable and still unwraps to the original (a
// *pgconn.PgError, a net.Error, context.DeadlineExceeded, …).
func unavailable(op string, err error) error { return pgschema.Unavailable("pgstore", op, err) }

// Transient reports whether err is a fault that a later retry of the whole
// call may not meet again: the connection was lost or refused, the server
// is shutting down or starting, the pool could not hand out a connection in
// time, or the server aborted the transaction (serialization failure,
// deadlock, lock or statement timeout, too many connections). A false
// answer for an error matching idem.ErrUnavailable means a configuration or
// programming error (a missing table, a permission) that retries will not
// cure.
func Transient(err error) bool {
	// pgschema judges a *pgconn.PgError by its SQLSTATE, and anything
	// else (the network, the pool, a timeout or a cancellation) as
	// transient.
	return pgschema.Transient(err)
}

package transfers

import (
	"errors"
	"net/http"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// lostToConcurrent reports whether err is the database rolling back the
// request's transaction because a concurrent one won: a deadlock or a
// serialization failure on PostgreSQL, a deadlock on MySQL, which is also
// how a Galera node reports a certification conflict with a transaction
// committed on another node. Nothing was applied, and the same request
// may well succeed when retried.
func lostToConcurrent(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 // ER_LOCK_DEADLOCK
	}
	return false
}

// conflicted answers a request that lost to a concurrent transaction: 409
// with Retry-After, as a key in flight is answered, since nothing was
// applied and a retry with the same key is what the client should do.
func conflicted(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	problem(w, http.StatusConflict, "concurrent-transaction", "Conflicting concurrent transaction",
		"a concurrent transaction changed the same rows and won; nothing was applied; retry with the same Idempotency-Key")
}

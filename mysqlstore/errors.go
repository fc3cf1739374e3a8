package mysqlstore

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
)

// unavailable wraps a failure of the database, the network or the pool so
// that it matches idem.ErrUnavailable and still unwraps to the original (a
// *mysql.MySQLError, a net.Error, context.DeadlineExceeded, …). Every
// failure is wrapped: a store that cannot do its job fails closed.
func unavailable(op string, err error) error {
	if err == nil || errors.Is(err, idem.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: mysqlstore: %s: %w", idem.ErrUnavailable, op, err)
}

// MySQL's error numbers the store tells apart.
const (
	errDupEntry         = 1062 // ER_DUP_ENTRY
	errSavepointMissing = 1305 // ER_SP_DOES_NOT_EXIST: the work ended Begin's transaction
	errLockWaitTimeout  = 1205 // ER_LOCK_WAIT_TIMEOUT
	errLockDeadlock     = 1213 // ER_LOCK_DEADLOCK
	errQueryInterrupted = 1317 // ER_QUERY_INTERRUPTED
	errConCount         = 1040 // ER_CON_COUNT_ERROR: too many connections
	errTooManyUser      = 1203 // ER_TOO_MANY_USER_CONNECTIONS
	errServerShutdown   = 1053 // ER_SERVER_SHUTDOWN
	errQueryTimeout     = 3024 // ER_QUERY_TIMEOUT (MySQL's max_execution_time)
	errStatementTimeout = 1969 // ER_STATEMENT_TIMEOUT (MariaDB's max_statement_time)
	errCertification    = 1180 // ER_ERROR_DURING_COMMIT (a Galera certification failure, among others)
	errWsrepNotReady    = 1047 // ER_UNKNOWN_COM_ERROR: a Galera node that is not ready ("WSREP has not yet prepared node")
)

// errNumber returns the number of the first *mysql.MySQLError in err's
// chain, and whether there is one.
func errNumber(err error) (uint16, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return 0, false
	}
	return me.Number, true
}

func isErr(err error, number uint16) bool {
	n, ok := errNumber(err)
	return ok && n == number
}

// Transient reports whether err is a fault that a later retry of the whole
// call may not meet again: the connection was lost or refused, the server
// is shutting down, the pool could not hand out a connection in time, or
// the server aborted the statement or the transaction (deadlock, lock
// wait or statement timeout, too many connections, a Galera certification
// conflict or a node not ready). A false answer for an error matching
// idem.ErrUnavailable means a configuration or programming error (a
// missing table, a permission) that retries will not cure.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	n, ok := errNumber(err)
	if !ok {
		// The network, the pool, a timeout or a cancellation.
		return !errors.Is(err, errWorkEndedTx)
	}
	switch n {
	case errLockWaitTimeout, errLockDeadlock, errQueryInterrupted, errConCount, errTooManyUser,
		errServerShutdown, errQueryTimeout, errStatementTimeout, errCertification, errWsrepNotReady:
		return true
	}
	// 2000-2999 are the client's own (CR_SERVER_GONE_ERROR, CR_SERVER_LOST, …).
	return n >= 2000 && n < 3000
}

// errWorkEndedTx is the error of a work that ended Begin's transaction
// itself.
var errWorkEndedTx = errors.New("the work ended the transaction itself (an Exec of COMMIT or ROLLBACK, or a statement that commits implicitly, such as DDL); nothing was recorded")

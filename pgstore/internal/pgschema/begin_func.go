package pgschema

import (
	"strconv"
	"time"

	"github.com/idemkit/idem"
)

// beginFuncSQL is migration 3: the function "<table>_begin", with which a
// store that cannot pipeline (sqldb, on database/sql) claims a key and reads
// its record in one statement, one round trip.
//
// It takes the key's transaction-scoped advisory try-lock, sets the
// transaction's connection check and idle timeout (see Statements.Lock),
// and only then reads the record. The function is VOLATILE and in PL/pgSQL,
// so in READ COMMITTED its SELECT runs with a snapshot of its own,
// taken after the lock was granted: the read sees every record committed
// before that (docs/DESIGN.md, pitfall "snapshot before lock"), which one
// plain statement fusing lock and read could not.
func beginFuncSQL(n Names) string {
	// Assignments, not PERFORM, and SELECT INTO, not RETURN QUERY: an
	// assignment is a simple expression PL/pgSQL evaluates without the
	// executor, and SELECT INTO fills the OUT parameters without a
	// tuplestore. The SELECT still runs through SPI with a snapshot of
	// its own.
	return `CREATE OR REPLACE FUNCTION ` + n.BeginFunc + `(lock_key bigint, p_scope text, p_key text, conn_check text, idle text,
	OUT locked boolean, OUT tx_start timestamptz, OUT r_fingerprint text, OUT r_state text, OUT r_status integer,
	OUT r_headers jsonb, OUT r_body bytea, OUT r_created_at timestamptz, OUT r_expires_at timestamptz)
LANGUAGE plpgsql VOLATILE AS $idem$
DECLARE
	ignored text;
BEGIN
	locked := pg_try_advisory_xact_lock(lock_key);
	IF conn_check <> '' THEN
		ignored := set_config('client_connection_check_interval', conn_check, true);
	END IF;
	IF idle <> '' THEN
		ignored := set_config('idle_in_transaction_session_timeout', idle, true);
	END IF;
	tx_start := transaction_timestamp();
	SELECT r.fingerprint, r.state, r.status, r.headers, r.body, r.created_at, r.expires_at
	INTO r_fingerprint, r_state, r_status, r_headers, r_body, r_created_at, r_expires_at
	FROM ` + n.Table + ` AS r WHERE r.scope = p_scope AND r.key = p_key;
END
$idem$`
}

// BeginCall returns the statement that calls the begin function of
// migration 3 and its parameters for (scope, key) under lockKey: conn is
// whether the server takes client_connection_check_interval (see
// ConnCheck), idle the transaction's idle_in_transaction_session_timeout
// (negative: leave the server's). ScanBegin reads its row.
func (st *Statements) BeginCall(lockKey int64, scope, key string, conn bool) (string, []any) {
	check := ""
	if conn {
		check = ConnectionCheckInterval
	}
	return st.beginCall, []any{lockKey, scope, key, check, st.idleMs}
}

// idleMs is idle as the text set_config takes, in whole milliseconds
// rounded up; empty for a negative or zero idle.
func idleMs(idle time.Duration) string {
	if idle <= 0 {
		return ""
	}
	return strconv.FormatInt(int64((idle+time.Millisecond-1)/time.Millisecond), 10)
}

// ScanBegin reads the row of the begin function: whether the lock was
// granted, the transaction's start (for Insert) and the record, nil when
// there is none.
func ScanBegin(row Row, scope, key string) (locked bool, txStart time.Time, rec *idem.Record, err error) {
	var f nullRecord
	if err := row.Scan(append([]any{&locked, &txStart}, f.dest()...)...); err != nil {
		return false, time.Time{}, nil, err
	}
	rec, err = f.record(scope, key)
	return locked, txStart, rec, err
}

// IsUndefinedFunction reports whether err says a function does not exist:
// the begin function on a table whose migrations stopped before 3 (a
// store configured with SkipMigrate).
func IsUndefinedFunction(err error) bool {
	code, ok := SQLState(err)
	return ok && code == "42883"
}

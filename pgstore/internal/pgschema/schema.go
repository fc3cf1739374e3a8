// Package pgschema is what pgstore and pgstore/sqldb share so that both
// drive one table the same way: the defaults and checks of their Config,
// the quoted names, the migrations, the SQL of every statement, the
// advisory lock key, the reading of a record and the classification of
// PostgreSQL errors. It imports no driver, so that a database/sql user
// never builds pgx.
//
// A service may move from one store to the other, or run both at once on
// one table: the rows, the migrations recorded in "<Table>_migrations" and
// the lock keys are identical, so the two exclude each other on a key and
// replay each other's records. Change anything here only in a way both
// stores keep, and append migrations, never edit a released one.
package pgschema

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Names are the quoted identifiers of one store's table.
type Names struct {
	Schema     string // "s"
	Table      string // "s"."t"
	Migrations string // "s"."t_migrations"
	PKey       string // "t_pkey"
	ExpiresIdx string // "t_expires_at_idx"

	// The objects of leased mode (migration 2).
	PendingIdx string // "t_pending_idx": lease_until of pending records
	Steps      string // "s"."t_steps": the recovery points
	StepsPKey  string // "t_steps_pkey"

	// BeginFunc is the function of migration 3, "s"."t_begin".
	BeginFunc string

	// Audit is the audit log of idem.Admin (migration 5), "s"."t_audit".
	Audit string
	// The outbox of migration 6 (outbox.go).
	Outbox        string // "s"."t_outbox"
	OutboxID      string // "t_outbox_id": the unique message id
	OutboxPending string // "t_outbox_pend": seq of the messages not sent
	OutboxSent    string // "t_outbox_sent": sent_at of the sent messages
	OutboxChannel string // the NOTIFY channel, unquoted: "s.t_outbox", at most 63 bytes
	OutboxLockNS  int32  // the first key of the partitions' advisory locks
}

// NewNames quotes the identifiers of table in schema. Both must have
// passed Settings.Check.
func NewNames(schema, table string) Names {
	return Names{
		Schema:     Quote(schema),
		Table:      Quote(schema) + "." + Quote(table),
		Migrations: Quote(schema) + "." + Quote(table+"_migrations"),
		PKey:       Quote(table + "_pkey"),
		ExpiresIdx: Quote(table + "_expires_at_idx"),
		PendingIdx: Quote(table + "_pending_idx"),
		Steps:      Quote(schema) + "." + Quote(table+"_steps"),
		StepsPKey:  Quote(table + "_steps_pkey"),
		BeginFunc:  Quote(schema) + "." + Quote(table+"_begin"),
		Audit:      Quote(schema) + "." + Quote(table+"_audit"),

		Outbox:        Quote(schema) + "." + Quote(table+"_outbox"),
		OutboxID:      Quote(table + "_outbox_id"),
		OutboxPending: Quote(table + "_outbox_pend"),
		OutboxSent:    Quote(table + "_outbox_sent"),
		OutboxChannel: outboxChannel(schema, table),
		OutboxLockNS:  outboxLockNS(schema, table),
	}
}

// Quote returns name as a quoted SQL identifier: in double quotes, each
// double quote doubled. Any name is safe in it (Settings.Check has
// refused the NUL byte, which PostgreSQL cannot hold).
func Quote(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// recordColumns are the columns a record is read from, in the order
// ScanRecord scans them.
const recordColumns = `fingerprint, state, status, headers, body, created_at, expires_at`

// Statements is the SQL of the hot path, built once per store. The
// parameters are positional ($1, $2, …), which pgx and every
// database/sql driver for PostgreSQL accept.
type Statements struct {
	// Lock tries the key's transaction-scoped advisory lock: $1 is
	// LockKey. It returns the lock's boolean, a text to discard and the
	// transaction's start time. The same statement sets, for the rest of
	// the transaction only:
	//
	//   - client_connection_check_interval: a backend that waits (on a
	//     row lock, a slow query) while its client is gone notices within
	//     ConnectionCheckInterval, once the client's socket is closed,
	//     and rolls back, which frees the key's lock. Without it, a
	//     crashed process's transaction would hold the key until that
	//     wait ended, and every retry would be answered "in flight"
	//     meanwhile.
	//   - idle_in_transaction_session_timeout: a backend idle between two
	//     statements of the work for longer ends its session and rolls
	//     back. It bounds the hold of a client that vanished without
	//     closing its socket (power loss, a partition), which no check of
	//     the socket sees: without it, the key would be held until TCP
	//     keepalive gives up, about two hours by default.
	//
	// Servers without client_connection_check_interval get LockPlain (see
	// ConnCheck).
	Lock string

	// LockPlain is Lock without the connection check. Both return, third,
	// transaction_timestamp(), for Insert.
	LockPlain string

	// TryLock tries the key's lock ($1) alone, for a probe that runs
	// outside any explicit transaction: it is released at the end of the
	// implicit transaction of the probe. It sets nothing.
	TryLock string

	// Select reads the record of ($1 scope, $2 key) for ScanRecord. It
	// must run in a statement after Lock, never fused with it: its
	// snapshot must be taken once the lock is granted.
	Select string

	// Delete deletes the record of ($1 scope, $2 key) only if it has
	// expired at $3. A live record stays and makes Insert fail on the
	// primary key.
	Delete string

	// Insert writes a record: scope, key, fingerprint, state, status,
	// headers (jsonb, NULL for none), body, created_at, expires_at, and a
	// tenth parameter, the transaction_timestamp() that Lock returned. In
	// any other transaction than Lock's (the work ended that one itself,
	// with an Exec of COMMIT or ROLLBACK, and perhaps began another) the
	// fingerprint becomes NULL and the INSERT fails with not_null_violation
	// (see IsOtherTx): the record never commits without the effect, and
	// the error stops a pipeline before its COMMIT. The check costs no
	// statement of its own.
	Insert string

	// Sweep deletes at most $2 records that have expired at $1, chosen
	// through the expires_at index by ctid. The outer expires_at test is
	// re-checked on the newest row version if a row changed after the
	// inner SELECT: it never deletes a live row.
	Sweep string

	// Probe tries the key's lock ($1) and reads the record of ($2 scope,
	// $3 key) in one statement, outside any explicit transaction, for
	// ScanProbe. Its read may take its snapshot before the lock, so its
	// answer is only ever trusted for a live record (final) or a held
	// lock (in flight); a free key without a live record must still go
	// through Lock and then Select in a transaction.
	Probe string

	// beginCall and idleMs are BeginCall's statement and idle parameter
	// (begin_func.go).
	beginCall, idleMs string
}

// ConnectionCheckInterval is the client_connection_check_interval that
// Statements.Lock sets for the stores' transactions.
const ConnectionCheckInterval = "1s"

// NewStatements returns the statements on the table n names. idle is the
// idle_in_transaction_session_timeout that Lock and LockPlain set for the
// transaction (Settings.IdleInTransactionTimeout); a negative idle sets
// nothing and leaves the server's.
func NewStatements(n Names, idle time.Duration) Statements {
	setIdle := idleSetting(idle)
	return Statements{
		Lock:      `SELECT pg_try_advisory_xact_lock($1), set_config('client_connection_check_interval', '` + ConnectionCheckInterval + `', true) || ` + setIdle + `, transaction_timestamp()`,
		LockPlain: `SELECT pg_try_advisory_xact_lock($1), ` + setIdle + `, transaction_timestamp()`,
		TryLock:   `SELECT pg_try_advisory_xact_lock($1)`,
		Select:    `SELECT ` + recordColumns + ` FROM ` + n.Table + ` WHERE scope = $1 AND key = $2`,
		Delete:    `DELETE FROM ` + n.Table + ` WHERE scope = $1 AND key = $2 AND expires_at <= $3`,
		Insert:    `INSERT INTO ` + n.Table + ` (scope, key, ` + recordColumns + `) VALUES ($1, $2, CASE WHEN transaction_timestamp() = $10::timestamptz THEN $3::text END, $4, $5, $6, $7, $8, $9)`,
		Sweep:     `DELETE FROM ` + n.Table + ` WHERE ctid = ANY (ARRAY (SELECT ctid FROM ` + n.Table + ` WHERE expires_at <= $1 LIMIT $2)) AND expires_at <= $1`,
		Probe: `SELECT l.locked, r.fingerprint, r.state, r.status, r.headers, r.body, r.created_at, r.expires_at
FROM (SELECT pg_try_advisory_xact_lock($1) AS locked) AS l
LEFT JOIN ` + n.Table + ` AS r ON r.scope = $2 AND r.key = $3`,
		beginCall: `SELECT * FROM ` + n.BeginFunc + `($1, $2, $3, $4, $5)`,
		idleMs:    idleMs(idle),
	}
}

// idleSetting is the expression that sets idle_in_transaction_session_timeout
// to idle for the transaction, or an empty text for a negative idle.
func idleSetting(idle time.Duration) string {
	ms := idleMs(idle)
	if ms == "" {
		return `''::text`
	}
	return `set_config('idle_in_transaction_session_timeout', '` + ms + `', true)`
}

// ConnCheck remembers whether the server has client_connection_check_interval.
// It asks on first use, not in New, so that a store can be created while the
// server is down. The zero value is ready to use.
type ConnCheck struct {
	known atomic.Pointer[string] // the lock statement, once known

	mu      sync.Mutex
	running chan struct{} // closed when the detection under way ends
}

// Lock returns st.Lock or st.LockPlain, whichever the server takes. The
// first caller runs detect (ConnectionCheck in a transaction the store
// rolls back); callers that arrive meanwhile wait for it, each only as long
// as its own ctx allows. A failed detection is not remembered: the next
// caller asks again.
func (c *ConnCheck) Lock(ctx context.Context, st *Statements, detect func(context.Context) (bool, error)) (string, error) {
	for {
		if l := c.known.Load(); l != nil {
			return *l, nil
		}
		c.mu.Lock()
		if l := c.known.Load(); l != nil {
			c.mu.Unlock()
			return *l, nil
		}
		if wait := c.running; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		}
		done := make(chan struct{})
		c.running = done
		c.mu.Unlock()
		if err := c.detect(ctx, st, detect, done); err != nil {
			return "", err
		}
	}
}

// detect runs one detection and, whatever happens in it (a panic
// included), lets the waiters go.
func (c *ConnCheck) detect(ctx context.Context, st *Statements, detect func(context.Context) (bool, error), done chan struct{}) error {
	defer func() {
		c.mu.Lock()
		c.running = nil
		c.mu.Unlock()
		close(done)
	}()
	ok, err := detect(ctx)
	if err != nil {
		return err
	}
	l := st.LockPlain
	if ok {
		l = st.Lock
	}
	c.known.Store(&l)
	return nil
}

// Forget drops what Lock learnt, so that the next call asks the server
// again. The stores call it when the locking statement fails for want of
// the setting (a server replaced by an older one, a proxy in between).
func (c *ConnCheck) Forget() { c.known.Store(nil) }

// IsMissingSetting reports whether err says the server does not accept
// client_connection_check_interval: undefined_object (before PostgreSQL
// 14) or invalid_parameter_value (a platform without the kernel support).
func IsMissingSetting(err error) bool {
	code, ok := SQLState(err)
	return ok && (code == "42704" || code == "22023")
}

// ConnectionCheck reports whether the server accepts
// client_connection_check_interval (PostgreSQL 14 and later, on Linux,
// macOS and the BSDs). It sets it in the transaction q runs in, which the
// caller rolls back whatever the answer.
func ConnectionCheck(ctx context.Context, q Querier) (bool, error) {
	var v string
	err := q.QueryRow(ctx, `SELECT set_config('client_connection_check_interval', '`+ConnectionCheckInterval+`', true)`).Scan(&v)
	if IsMissingSetting(err) {
		return false, nil
	}
	return err == nil, err
}

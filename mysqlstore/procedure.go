package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idem"
)

// A first execution in atomic mode is a few statements of the store's
// around the work's. go-sql-driver sends one statement per round trip,
// and a stored procedure runs several in one: Begin's lock, read,
// transaction and savepoint are one CALL, Commit's savepoint check,
// INSERT, COMMIT and lock release another. The procedures hold no logic of their own that
// the statement path lacks: they are its statements, in its order, with
// its values as parameters. Migrate creates them (CREATE PROCEDURE … IF
// NOT EXISTS, SQL SECURITY INVOKER: they run with the caller's
// privileges); a store whose procedures are missing (an account without
// CREATE ROUTINE, SkipMigrate on tables migrated by an older release)
// sends the statements one by one instead, with the same result.
//
// A procedure's body never changes once released: a new body gets a new
// name.

// procedureStatements are the CREATE PROCEDURE statements of n's table.
func procedureStatements(n names) []string {
	return []string{
		`CREATE PROCEDURE IF NOT EXISTS ` + n.beginProc + ` (p_lock VARBINARY(64), p_scope VARBINARY(255), p_key VARBINARY(255), p_now BIGINT, p_wait INT, p_open BOOL)
	MODIFIES SQL DATA SQL SECURITY INVOKER
	COMMENT ` + sqlString(beginComment) + `
BEGIN
	DECLARE v_locked INT DEFAULT NULL;
	DECLARE v_found INT DEFAULT 1;
	DECLARE v_live INT DEFAULT 0;
	IF p_open THEN
		COMMIT;
	END IF;
	IF p_wait IS NOT NULL THEN
		SET SESSION wait_timeout = p_wait;
	END IF;
	SET v_locked = GET_LOCK(p_lock, 0);
	IF v_locked = 1 THEN
		SELECT COUNT(*), COALESCE(MAX(state = 'pending' OR expires_at > p_now), 0) INTO v_found, v_live FROM ` + n.table + ` WHERE scope = p_scope AND ` + "`key`" + ` = p_key;
		IF v_live > 0 THEN
			DO RELEASE_LOCK(p_lock);
		END IF;
	END IF;
	IF v_found = 0 THEN
		SELECT v_locked, v_live, ` + nulls(len(splitColumns)) + `;
	ELSE
		SELECT v_locked, v_live, ` + prefixed("r.") + ` FROM (SELECT 1) AS d LEFT JOIN ` + n.table + ` AS r ON r.scope = p_scope AND r.` + "`key`" + ` = p_key;
	END IF;
	IF v_locked = 1 AND v_live = 0 THEN
		START TRANSACTION;
		SAVEPOINT idem_begin;
	END IF;
END`,
		`CREATE PROCEDURE IF NOT EXISTS ` + n.commitProc + ` (p_lock VARBINARY(64), p_scope VARBINARY(255), p_key VARBINARY(255),
	p_fingerprint BLOB, p_state VARBINARY(16), p_status INT, p_headers BLOB, p_body LONGBLOB,
	p_created_at BIGINT, p_expires_at BIGINT, p_expired_before BIGINT)
	MODIFIES SQL DATA SQL SECURITY INVOKER
	COMMENT ` + sqlString(commitComment) + `
BEGIN
	RELEASE SAVEPOINT idem_begin;
	IF p_expired_before IS NOT NULL THEN
		DELETE FROM ` + n.table + ` WHERE scope = p_scope AND ` + "`key`" + ` = p_key AND expires_at <= p_expired_before;
	END IF;
	INSERT INTO ` + n.table + ` (scope, ` + "`key`" + `, fingerprint, state, status, headers, body, created_at, expires_at, kind, last_error)
		VALUES (p_scope, p_key, p_fingerprint, p_state, p_status, p_headers, p_body, p_created_at, p_expires_at, '', '');
	COMMIT;
	DO RELEASE_LOCK(p_lock);
END`,
	}
}

// nulls is n NULL columns: the record's, when the key has none.
func nulls(n int) string {
	return strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
}

// Errors of CREATE PROCEDURE after which the store goes on without its
// procedures: the account may not create routines, or the server does
// not know CREATE PROCEDURE … IF NOT EXISTS (MySQL before 8.0.29).
const (
	errDBAccessDenied       = 1044 // ER_DBACCESS_DENIED_ERROR
	errTableAccessDenied    = 1142 // ER_TABLEACCESS_DENIED_ERROR
	errSpecificAccessDenied = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	errProcAccessDenied     = 1370 // ER_PROCACCESS_DENIED_ERROR
	errParse                = 1064 // ER_PARSE_ERROR
)

// createProcedures creates the procedures if it may. An account that may
// not is no error: the store then sends the statements one by one.
func (s *Store) createProcedures(ctx context.Context, conn *sql.Conn) error {
	for _, stmt := range procedureStatements(s.names) {
		_, err := conn.ExecContext(ctx, stmt)
		n, _ := errNumber(err)
		switch n {
		case errDBAccessDenied, errTableAccessDenied, errSpecificAccessDenied, errProcAccessDenied, errParse:
			return nil
		}
		if err != nil {
			return fmt.Errorf("create procedures: %w", err)
		}
	}
	return nil
}

// hasProcedures reports whether both procedures exist, are the store's,
// with the bodies this code calls, and the account may see them. A
// routine of yours that bears the name is left alone, and so is one of
// the store's with another body: each body's COMMENT names it exactly.
// Routine names compare case- and accent-insensitively, table names byte
// for byte: the procedures of a table `Orders` also answer to
// `orders_begin`, and CREATE PROCEDURE IF NOT EXISTS skips that name. The
// names are compared as bytes here (BINARY), so a store on `orders` does
// not call `Orders`'s procedures: it runs its statements one by one.
func (s *Store) hasProcedures(ctx context.Context) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = "+hexLit(s.cfg.Database)+
		" AND ROUTINE_TYPE = 'PROCEDURE' AND ((BINARY ROUTINE_NAME = BINARY "+hexLit(s.cfg.Table+beginSuffix)+" AND ROUTINE_COMMENT = "+hexLit(beginComment)+
		") OR (BINARY ROUTINE_NAME = BINARY "+hexLit(s.cfg.Table+commitSuffix)+" AND ROUTINE_COMMENT = "+hexLit(commitComment)+"))").Scan(&n)
	return n == 2, err
}

// The COMMENTs of the procedures, which the store checks before it calls
// them. A body that changes gets a new name (beginSuffix, commitSuffix)
// and a new comment; TestProcedureBodiesArePinned fails until it does.
const (
	beginComment  = "idem mysqlstore: Begin, body 1 (the key's lock, its record, then the transaction and its savepoint)"
	commitComment = "idem mysqlstore: Commit, body 1 (the savepoint, the record, COMMIT, the key's lock)"
)

// sqlString is s as a quoted SQL string literal (s has no backslash).
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// procedureUnusable reports whether err is a CALL's refusal to run the
// store's procedure named name (bare, without the database): the account
// may not execute it (a grant without EXECUTE still shows it in
// information_schema), or it was dropped under the running store. The
// store then goes on by statements. A missing SAVEPOINT, raised inside
// the commit procedure when the work ended the transaction, has the same
// error number: the message, in whatever language the server speaks,
// names the procedure in the one case and the savepoint in the other.
func procedureUnusable(err error, name string) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errProcAccessDenied:
		return true
	case errSavepointMissing:
		return strings.Contains(me.Message, name)
	}
	return false
}

// The procedures' names are the table's with these suffixes.
const (
	beginSuffix  = "_begin"
	commitSuffix = "_commit"
)

// beginCall is Begin's lock, read, transaction and savepoint in one
// CALL, through tx. The reads run outside any transaction, as the
// statement path's do: under SERIALIZABLE a read inside one is a
// locking read, which would wait on a row lock and leave gap locks that
// make two keys' INSERTs deadlock. On a connection of yours (open),
// database/sql has already begun tx's transaction: the procedure commits
// it, empty, first. The transaction the work runs in is the one the
// procedure starts after its reads. It reports whether the key's lock
// was granted, whether the procedure found a live record (and then
// released the lock), and the record.
func (s *Store) beginCall(ctx context.Context, tx *sql.Tx, name string, p *idem.BeginParams, open bool) (locked, live bool, rec *idem.Record, err error) {
	begun := "FALSE"
	if open {
		begun = "TRUE"
	}
	wait := "NULL"
	if sec := s.cfg.idleSeconds(); sec > 0 {
		wait = intLit(sec)
	}
	var got sql.NullInt64
	var n int64
	var nr nullRecord
	err = tx.QueryRowContext(ctx, "CALL "+s.names.beginProc+"("+hexLit(name)+", "+hexLit(p.Scope)+", "+hexLit(p.Key)+", "+
		intLit(micros(p.Now))+", "+wait+", "+begun+")").Scan(append([]any{&got, &n}, nr.dest()...)...)
	if err != nil {
		return false, false, nil, err
	}
	rec, err = nr.record(p.Scope, p.Key)
	return got.Int64 == 1, n > 0, rec, err
}

// commitCall is Commit on a store with procedures: one CALL releases the
// savepoint, deletes the expired record Begin saw, inserts the record,
// commits and releases the key's lock. It runs in a goroutine of its own,
// like the statement path's COMMIT: a server that hangs must not hold the
// caller past ctx.
func (t *Tx) commitCall(ctx context.Context, p *idem.CommitParams, headers string) error {
	r := p.Record
	state, body := storedValues(r)
	expired := "NULL"
	if t.expiredRow {
		expired = intLit(micros(p.Now))
	}
	stmt := "CALL " + t.store.names.commitProc + "(" + hexLit(t.lock) + ", " + hexLit(t.scope) + ", " + hexLit(t.key) + ", " +
		hexLit(r.Fingerprint) + ", " + hexLit(string(state)) + ", " + intLit(int64(r.Result.Status)) + ", " + headers + ", " +
		hexLit(body) + ", " + intLit(micros(r.CreatedAt)) + ", " + intLit(micros(r.ExpiresAt)) + ", " + expired + ")"
	done := make(chan error, 1)
	go func() {
		if h := t.store.commitHook; h != nil {
			if err := h(); err != nil {
				done <- err
				return
			}
		}
		_, err := t.tx.ExecContext(context.WithoutCancel(ctx), stmt)
		if err == nil {
			// The CALL committed and released the lock; this Commit
			// ends the *sql.Tx before Commit returns, so that a
			// statement sent through it afterwards gets ErrTxDone
			// (a COMMIT with no transaction on a connection of
			// yours, nothing on Open's).
			if t.deferred != nil {
				t.deferred.committed = true
			}
			_ = t.tx.Commit()
		}
		done <- err
		if err == nil {
			t.cancel()
			_ = t.conn.Close()
		}
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		go func() {
			if err := <-done; err != nil {
				t.end(context.Background(), false)
			}
		}()
		return unavailable("commit", fmt.Errorf("the commit did not answer in time, and goes on in the background: the outcome is unknown: %w", context.Cause(ctx)))
	}
	if err == nil {
		return nil
	}
	if procedureUnusable(err, t.store.cfg.Table+commitSuffix) {
		// The CALL did not run: the transaction, its savepoint and the
		// key's lock are as Begin left them, and the statements commit
		// them.
		t.store.procs.Store(false)
		return t.commitStatements(ctx, p, headers)
	}
	t.end(context.WithoutCancel(ctx), false)
	switch {
	case isErr(err, errSavepointMissing) || errors.Is(err, sql.ErrTxDone):
		return unavailable("commit", fmt.Errorf("%w: %w", errWorkEndedTx, err))
	case isErr(err, errDupEntry):
		return dupRecord(t.scope, t.key)
	case isErr(err, errLockDeadlock) || isErr(err, errCertification):
		return lostToConcurrent(t.scope, t.key, err)
	}
	return unavailable("commit", err)
}

// dupRecord is the error of a record's INSERT that the primary key
// refused: a live record of the key is there.
func dupRecord(scope, key string) error {
	// MySQL's message quotes the key's value: it stays out of the error,
	// which ends up in logs.
	return fmt.Errorf("%w: mysqlstore: %s: the primary key refused the insert (error %d)", idem.ErrConflict, recordName(scope, key), errDupEntry)
}

// beginWithCall is Begin on a store with procedures, on conn: the
// transaction first, then the CALL that tries the lock, reads the record
// and sets the savepoint.
func (s *Store) beginWithCall(ctx context.Context, conn *sql.Conn, name string, p *idem.BeginParams) (*idem.Record, idem.Tx, error) {
	var locked, live bool
	var rec *idem.Record
	var d *deferredTx
	if s.deferred {
		d = &deferredTx{}
	}
	tx, cancel, err := openTx(ctx, conn, d, func(tx *sql.Tx) error {
		var err error
		locked, live, rec, err = s.beginCall(ctx, tx, name, p, d == nil)
		if d != nil && err == nil {
			d.open = locked && !live
		}
		return err
	})
	if err != nil {
		if procedureUnusable(err, s.cfg.Table+beginSuffix) {
			// Nothing ran, and the transaction was rolled back: the
			// statements do the same on the same connection.
			s.procs.Store(false)
			return s.beginStatements(ctx, conn, name, p)
		}
		closeConn(conn) // the server releases the lock with the session
		return nil, nil, unavailable("begin", ctxCause(ctx, err))
	}
	if locked && !live {
		return nil, &Tx{store: s, conn: conn, tx: tx, deferred: d, cancel: cancel, lock: name, scope: p.Scope, key: p.Key, expiredRow: rec != nil}, nil
	}
	// A live record (the CALL released the lock), or a lock held
	// elsewhere: the transaction wrote nothing.
	err = tx.Rollback()
	cancel()
	if err != nil {
		closeConn(conn)
	} else {
		_ = conn.Close()
	}
	if rec != nil && (live || !rec.Expired(p.Now)) {
		return rec, nil, nil
	}
	return nil, nil, idem.ErrInFlight
}

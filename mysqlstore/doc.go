// Package mysqlstore is the MySQL and MariaDB idem.Store (InnoDB), on
// database/sql and github.com/go-sql-driver/mysql.
//
// The record, the caller's effect and the recorded result commit in one
// InnoDB transaction (atomic mode). The work passed to idem.Guard.Do
// writes its effect through the *sql.Tx that TxFrom returns:
//
//	store, _ := mysqlstore.Open(ctx, "app:pw@tcp(127.0.0.1:3306)/bank?interpolateParams=true", nil) // applies the migrations
//	store.DB().SetMaxOpenConns(20)
//	guard, _ := idem.New(store, nil)
//	res, replayed, err := guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
//		tx, _ := mysqlstore.TxFrom(ctx)
//		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - ? WHERE id = ?`, amount, from)
//		…
//	})
//
// New does the same on a *sql.DB of the caller's.
//
// # What the store guarantees
//
//   - The record, the effect and the result commit together or not at all;
//     the primary key on (scope, key) keeps a key from running twice.
//   - A retry of a key whose transaction is open is refused at once with
//     idem.ErrInFlight: Begin tries the key's user-level lock with
//     GET_LOCK(name, 0), which never waits, and never touches a row
//     another transaction may hold, so it never waits for
//     innodb_lock_wait_timeout either. The lock is the session's: the
//     server releases it when the session ends (a crash, a cut
//     connection), and Config.IdleTimeout (wait_timeout, 30 s) bounds a
//     host that vanished without a reset.
//   - A replay or a refusal does not wait for a connection held by a work
//     when Config.ProbeDB is set (Open sets one).
//   - Every value is stored as bytes (VARBINARY, BLOB): scopes, keys,
//     fingerprints, headers and bodies come back byte for byte, whatever
//     the connection's character set.
//   - Failures match idem.ErrUnavailable and keep the driver's error;
//     Transient tells those a retry may outlive.
//
// # Leased mode
//
// The Store is also an idem.LeasedTxStore, for idem.NewLeased: claims
// with fencing tokens that never repeat, recovery points in a steps
// table, local steps (idem.Run.LocalStep) in a transaction of the store
// that holds the record's row, and Abandoned for a Completer.
//
// docs/MYSQL.md explains how the store works and why: the tables, the
// statements of Begin and Commit, faults, leased mode, what differs on
// MySQL 8 and on a Galera cluster.
package mysqlstore

// Package sqldb is the PostgreSQL idem.Store for code that runs on
// database/sql: pgx's stdlib driver (github.com/jackc/pgx/v5/stdlib),
// lib/pq, or sqlx over either (pass the *sql.DB that sqlx.DB embeds). It is
// the twin of pgstore: the same table, the same migrations, the same lock
// keys, and the same rules.
//
// The key's claim, the caller's effect and the recorded result commit in one
// PostgreSQL transaction (atomic mode). The work passed to idem.Guard.Do
// writes its effect through the *sql.Tx that TxFrom returns:
//
//	db, _ := sql.Open("pgx", "postgres://…") // import _ "github.com/jackc/pgx/v5/stdlib"
//	store, _ := sqldb.New(ctx, db, nil)      // applies the migrations
//	guard, _ := idem.New(store, nil)
//	res, replayed, err := guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
//		tx, _ := sqldb.TxFrom(ctx)
//		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, from)
//		…
//	})
//
// The work must not end the transaction itself: the guard commits it with
// the record. Commit or Rollback on the *sql.Tx makes the record's write
// fail, and nothing is recorded. An Exec of COMMIT or ROLLBACK is not seen
// by database/sql, so the record's INSERT checks that it still runs in the
// transaction Begin started (its transaction_timestamp(), which the
// locking statement returns) and fails otherwise: nothing is recorded.
//
// # One table, two stores
//
// New takes a *pgstore.Config: Schema and Table name the table exactly as
// they do for pgstore, and SkipMigrate and ReplayProbe mean the same. The
// rows, the migrations (recorded in "<Table>_migrations") and the advisory
// lock key of (scope, key) are pgstore's, so a pgstore process and a sqldb
// process on one table replay each other's records, refuse each other's
// keys in flight with ErrInFlight, and apply the migrations once between
// them. A service can move from one store to the other, or run both while
// it moves, without a migration or a window of duplicates.
//
// # How Begin decides
//
// Begin runs, each statement a round trip of its own (database/sql cannot
// pipeline):
//
//	BEGIN ISOLATION LEVEL READ COMMITTED     (sql.TxOptions{Isolation: sql.LevelReadCommitted})
//	SELECT pg_try_advisory_xact_lock($hash)
//	SELECT … FROM records WHERE scope = $1 AND key = $2
//
// The isolation level is set explicitly, whatever the server's or the
// connection's default_transaction_isolation: under REPEATABLE READ the
// whole transaction would share the first snapshot. In READ COMMITTED
// every statement takes a new snapshot when it starts, so the SELECT,
// which comes after the lock, sees every record committed before the lock
// was granted, including one that the previous holder committed an
// instant before. The lookup is never fused into the locking statement,
// whose snapshot would predate the lock (DESIGN §7, "snapshot before
// lock").
//
// Then: a live record is the answer (even without the lock: a committed
// record is final), the transaction is rolled back and the record
// returned; a lock held elsewhere is ErrInFlight at once; otherwise the
// transaction stays open, holding the lock, for the work.
//
// Commit runs the DELETE of the key's record only when Begin saw an
// expired one, and only if it is still expired (deleting by key alone
// would delete a live record that a concurrent writer had just
// committed, DESIGN §7), then the INSERT of the record, then COMMIT. A
// live record makes the INSERT fail on the primary key (SQLSTATE 23505):
// the transaction is rolled back and Commit returns idem.ErrConflict,
// which the Guard resolves by replaying the winner. The SQLSTATE is read
// from any error in the chain with a SQLState() string method, which pgx's
// *pgconn.PgError and lib/pq's *pq.Error both have; the store needs no
// import of the driver.
//
// # Cancellation
//
// database/sql rolls a transaction back by itself, from another
// goroutine, as soon as the context given to BeginTx ends. The Guard,
// though, commits a work that succeeded even when the caller's context
// ended meanwhile (so that the caller's retry gets a replay rather than a
// second execution). Begin therefore begins the transaction on a context
// detached from ctx's cancellation (context.WithoutCancel), and the Tx ends
// it: the Guard always commits or rolls back. Until Begin returns, the end
// of ctx still cancels the transaction's context, so a wait for a pooled
// connection or a BEGIN obeys the caller's deadline; the work's statements
// obey the ctx they are given; Commit's ctx bounds its statements and, where
// the driver watches the BeginTx context during COMMIT (pgx's stdlib does,
// lib/pq does not), the COMMIT. A ROLLBACK is bounded at 5 seconds, past
// which the connection is dropped.
//
// # Round trips
//
// Besides the work's own statements, counted with pgx's stdlib driver once
// it has prepared the statements on a connection (it caches them; the
// first use on a connection costs one more each):
//
//	                   default   Config.ReplayProbe
//	first execution    5         6   (BEGIN, lock, SELECT, INSERT, COMMIT)
//	replay             4         1   (BEGIN, lock, SELECT, ROLLBACK)
//	in flight (409)    4         1
//
// A first execution that replaces an expired record pays one more, for
// its DELETE. A plain transaction of the same work costs BEGIN and COMMIT,
// two round trips, so sqldb adds three to a first execution where pgstore,
// which pipelines, adds none. Other drivers may need more: lib/pq, for
// one, sends each statement that has parameters in two round trips
// (Parse and Describe, then Bind and Execute) unless binary_parameters=yes.
// TestRoundTrips counts them on the wire.
//
// With ReplayProbe, Begin first sends one statement outside any
// transaction that tries the lock and reads the record, joined (a LEFT
// JOIN of the record to the lock's result): a live record is a replay, a
// held lock is ErrInFlight, each in one round trip; only a free key with
// no live record goes on to the transaction above. Fusing the lock and the
// read is safe there, and only there, because the probe never decides that
// a key is new: a record its snapshot missed is found by the SELECT in the
// transaction. Like pgstore's probe, it holds the key's lock for the
// instant of its statement, so a first execution racing a duplicate's
// probe may be refused with a spurious ErrInFlight.
//
// # Faults
//
// Every failure of the pool, the network or the server is returned wrapped
// so that it matches idem.ErrUnavailable and still unwraps to the driver's
// error (*pgconn.PgError, *pq.Error, driver.ErrBadConn, net.Error,
// context.DeadlineExceeded, …); Transient tells the faults a retry may
// outlive (connection loss, 57P01 admin shutdown, 57P03 starting up,
// 40001 serialization failure, 40P01 deadlock, 55P03 lock timeout, 57014
// statement timeout, class 08 and 53, any error without a SQLSTATE) from
// configuration and programming errors. It is pgstore's classification. A
// unique violation of the record's INSERT is idem.ErrConflict, never
// ErrUnavailable.
//
// When a connection breaks, pgx's stdlib driver reports it invalid and
// database/sql discards it instead of putting it back in the pool.
// Nothing needs restarting: TestTerminatedBackendsUnderLoad kills backends
// under load and the same *sql.DB serves afterwards. If the connection
// breaks after COMMIT was sent, the outcome is unknown: Commit returns
// ErrUnavailable and the client's retry finds the record if it committed
// (and replays it) or runs the work if it did not.
//
// A fault inside the work reaches the caller as the work's own error (the
// Guard returns it unchanged), with everything rolled back.
//
// As in pgstore, the locking statement sets client_connection_check_interval
// for the transaction where the server has it, so the backend of a process
// that died while its work waited on a lock aborts within a second and
// frees the key (see pgstore's Faults section).
//
// The durability, sweeping and very-large-volume notes of pgstore hold as
// they are: it is the same table and the same transaction.
package sqldb

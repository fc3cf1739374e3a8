// Package pgstore is the PostgreSQL idem.Store, on pgx v5 and pgxpool.
//
// The key's claim, the caller's effect and the recorded result commit in one
// PostgreSQL transaction (atomic mode). The work passed to idem.Guard.Do
// writes its effect through the pgx.Tx that TxFrom returns:
//
//	pool, _ := pgxpool.New(ctx, "postgres://…")
//	store, _ := pgstore.New(ctx, pool, nil) // applies the migrations
//	guard, _ := idem.New(store, nil)
//	res, replayed, err := guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
//		tx, _ := pgstore.TxFrom(ctx)
//		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, from)
//		…
//	})
//
// # Schema
//
// One table (Config.Schema, Config.Table; "public"."idem_records" by
// default) with the primary key (scope, key), an index on expires_at, and
// the columns fingerprint, state, status, headers (jsonb), body (bytea),
// created_at and expires_at (timestamptz, so times keep microseconds;
// finer digits are truncated). Migrate applies versioned migrations,
// embedded in the package, recorded in the table "<Table>_migrations";
// it runs in one transaction that first takes pg_advisory_xact_lock on a
// fixed id, so processes that start together apply them once. New calls
// it unless Config.SkipMigrate is set.
//
// # How Begin decides, and why the read comes after the lock
//
// Begin sends one pipelined batch (pgx.Batch with Batch.BeginTx):
//
//	BEGIN ISOLATION LEVEL READ COMMITTED
//	SELECT pg_try_advisory_xact_lock($hash), set_config(…), transaction_timestamp()
//	SELECT … FROM records WHERE scope = $1 AND key = $2
//
// The lock key is FNV-1a 64 over the length-prefixed qualified table name,
// scope and key. It only locks: the answer is decided by the stored
// (scope, key) and fingerprint, so a collision costs a spurious
// ErrInFlight, never someone else's result.
//
// In READ COMMITTED every statement takes a new snapshot when it starts,
// and so does each statement of a pipeline: the statements of a batch are
// separate Bind/Execute messages under one Sync. The SELECT therefore sees
// every record committed before the lock was granted, including one
// committed by the previous holder an instant before. A lookup fused into
// the locking statement would take its snapshot before the lock and can
// miss that record (DESIGN §7, "snapshot before lock");
// TestBatchStatementsTakeTheirOwnSnapshots shows both behaviours on a
// real server. The isolation level is set explicitly, because under
// REPEATABLE READ the whole transaction would share the first snapshot.
//
// Then: a live record is the answer (even without the lock: a committed
// record is final), the transaction is rolled back and the record
// returned; a lock held elsewhere is ErrInFlight at once; otherwise the
// transaction stays open, holding the lock, for the work.
//
// Commit sends, pipelined:
//
//	DELETE FROM records WHERE scope = $1 AND key = $2 AND expires_at <= $now
//	INSERT INTO records (…) VALUES (…, CASE WHEN transaction_timestamp() = $begin THEN $fingerprint END, …)
//	COMMIT
//
// The DELETE is sent only when Begin saw an expired record. The INSERT
// fails (the fingerprint is NOT NULL) unless it runs in the transaction
// Begin started, whose transaction_timestamp() the locking statement
// returned: a work that ended that transaction itself (an Exec of
// "ROLLBACK; BEGIN") would otherwise see its record commit without its
// effect. The error stops the pipeline and nothing is recorded.
//
// Only an expired record is deleted (deleting by key alone would delete a
// live record that a concurrent writer had just committed, DESIGN §7). A
// live record makes the INSERT fail on the primary key (23505): the server
// skips the rest of the pipeline, the store rolls back, and Commit returns
// idem.ErrConflict, which the Guard resolves by replaying the winner. An
// INSERT … ON CONFLICT DO UPDATE … WHERE expired was not used: it reports
// a live row as "0 rows", and a COMMIT pipelined behind it would commit the
// effect without its record.
//
// # Round trips
//
// Besides the work's own statements, and once pgx has prepared the
// statements on a connection (its first use costs one more):
//
//	                   default   Config.ReplayProbe
//	first execution    2         3   (begin batch, commit batch)
//	replay             2         1   (begin batch, ROLLBACK)
//	in flight (409)    2         1
//
// ReplayProbe first sends pg_try_advisory_xact_lock and the SELECT as a
// batch outside any explicit transaction (the lock lives for the implicit
// transaction of that one Sync): a live record or a held lock is answered
// from it, and only a free key pays for the real Begin. A plain
// transaction of the same work costs BEGIN and COMMIT, two round trips, as
// the default path does. TestRoundTrips counts them on the wire.
//
// # Faults
//
// Every failure of the pool, the network or the server is returned wrapped
// so that it matches idem.ErrUnavailable and still unwraps to the original
// (*pgconn.PgError, *pgconn.ConnectError, net.Error,
// context.DeadlineExceeded, …); Transient tells the faults a retry may
// outlive (connection loss, 57P01 admin shutdown, 57P03 starting up,
// 40001 serialization failure, 40P01 deadlock, 55P03 lock timeout, 57014
// statement timeout, class 08 and 53, pool acquire timeouts) from
// configuration errors (a missing table, a permission). A unique violation
// at Commit is idem.ErrConflict, never ErrUnavailable.
//
// When a connection breaks, pgx closes it and pgxpool destroys it on
// release; a connection whose transaction state is unknown is never reused.
// Nothing needs restarting: TestTerminatedBackendsUnderLoad kills backends
// under load and TestClusterRestartUnderLoad restarts the server (run it
// with IDEM_PG_RESTART_TEST=1), and the same pool serves afterwards. If the
// connection breaks after COMMIT was sent, the outcome is unknown:
// Commit returns ErrUnavailable and the client's retry finds the record if
// it committed (and replays it) or runs the work if it did not. Give every
// call a context deadline, or connect_timeout in the DSN: a connection
// attempt to a server that vanished otherwise waits for the kernel.
//
// A fault inside the work reaches the caller as the work's own error (the
// Guard returns it unchanged), with everything rolled back.
//
// A process that dies in the middle of a call leaves a backend behind. If
// that backend is idle it sees the closed socket at once and rolls back;
// if it is waiting (on a row lock held by someone else, in a long query)
// it would not notice until the wait ends, and the key would be answered
// "in flight" all that time. So the locking statement also sets
// client_connection_check_interval to 1s for the transaction (PostgreSQL
// 14 and later, on Linux, macOS and the BSDs; the store asks the server
// once, on its first Begin, and goes without it elsewhere): the orphaned
// backend aborts within a second and the key is free.
// TestAbandonedTransactionFreesKey cuts a client off while its work waits
// on a row lock and checks that the key frees while the row is still held.
//
// # Durability
//
// The record commits with the effect, so it is exactly as durable as the
// effect. With synchronous_commit = off (or local with asynchronous
// replicas), a server crash can lose the last commits: effect and record
// are lost together, never one without the other, so the retry runs the
// work again, correctly. With a synchronous standby, a failover keeps
// both. Do not lower synchronous_commit for the idem table alone: it is
// the same transaction.
//
// # Sweeping
//
// Expiry is checked on read; DeleteExpired only reclaims space. Each call
// is one statement that deletes at most Limit rows chosen through the
// expires_at index by ctid, re-checking expires_at on the row it deletes,
// so it never deletes a live record and holds its row locks briefly. Run
// idem.Sweeper (batches of 1000 by default) from one or more processes;
// concurrent sweepers only skip each other's rows. See BENCHMARKS.md for
// its rate and its effect on the hot path.
//
// # Very large volumes
//
// Beyond a few hundred million keys, deleting rows one by one costs more
// than it should. Two layouts, neither built by this package (create the
// table yourself, keep the column names, and set Config.SkipMigrate):
//
//   - Hash partitions on (scope, key) (PARTITION BY HASH (scope, key), for
//     example 16 of them). The primary key (scope, key) still holds, since
//     it contains the partition key, so E2 is kept; each partition and its
//     expires_at index stay small, and sweepers can work on partitions in
//     parallel.
//   - Range partitions on expires_at, dropped whole once past: the cheapest
//     reclaim, but PostgreSQL then cannot enforce a unique (scope, key)
//     across partitions, and uniqueness would rest on the advisory lock
//     alone, which the Store contract forbids. Use it only with a separate
//     unpartitioned (scope, key) key table, or not at all.
//
// # database/sql
//
// Code on database/sql (pgx's stdlib driver, lib/pq, sqlx) uses the twin
// package pgstore/sqldb: the same Config, table, migrations and advisory
// lock keys, so a pgstore process and a sqldb process on one table replay
// each other's records and refuse each other's keys in flight. It costs
// more round trips, since database/sql cannot pipeline: see its
// documentation.
package pgstore

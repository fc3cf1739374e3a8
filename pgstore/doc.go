// Package pgstore is the PostgreSQL idem.Store, on pgx v5 and pgxpool.
//
// The key's claim, the caller's effect and the recorded result commit in one
// PostgreSQL transaction (atomic mode). The work passed to idem.Guard.Do
// writes its effect through the pgx.Tx that TxFrom returns:
//
//	pool, _ := pgxpool.New(ctx, "postgres://…?pool_max_conns=20")
//	store, _ := pgstore.New(ctx, pool, nil) // applies the migrations
//	guard, _ := idem.New(store, nil)
//	res, replayed, err := guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
//		tx, _ := pgstore.TxFrom(ctx)
//		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, from)
//		…
//	})
//
// Open does the same from a connection string and owns the pool.
//
// # Leased mode
//
// The Store is also an idem.LeasedTxStore, for idem.NewLeased: work whose
// effects live outside the database claims its key first, as a pending
// record with a lease and a fencing token, and records recovery points in
// a steps table. A local step (idem.Run.LocalStep) writes through the
// pgx.Tx that TxFrom returns, and commits with its recovery point, fenced.
// pgstore/sqldb migrates the same tables but has no leased mode.
//
// # What the store guarantees
//
//   - The record, the effect and the result commit together or not at all;
//     a unique constraint on (scope, key) keeps a key from running twice.
//   - A retry of a key whose transaction is open is refused at once with
//     idem.ErrInFlight; the lock belongs to the transaction, so a crash
//     frees the key as soon as the server ends it. A host that vanished
//     without a reset while its work paused between statements holds it at
//     most Config.IdleInTransactionTimeout.
//   - A replay or a refusal does not wait for a pool connection held by a
//     work: when the pool has none idle, Begin asks on connections
//     reserved for that (Config.ProbeConns).
//   - Failures match idem.ErrUnavailable and keep the driver's error;
//     Transient tells those a retry may outlive.
//
// # Configuration
//
// Config's zero value is the default. The records live in Config.Schema,
// by default the pool's current_schema() (the first existing schema of its
// search_path, beside the caller's tables), in Config.Table
// ("idem_records"). Config.ReplayProbe trades a round trip of first
// executions for cheaper replays; Config.IdleInTransactionTimeout (30 s)
// is the longest pause a work may make between two statements;
// Config.ProbeConns (2) sizes the reserved connections. Size the pool
// itself (pool_max_conns) to the number of works that may run at once.
//
// pgstore/sqldb is the same store for code on database/sql: the same
// table, migrations and locks, so both can run on one table.
// docs/POSTGRES.md explains how the store works and why: the statements
// and their round trips, faults, abandoned work, pool sizing, leased mode,
// durability, sweeping and very large volumes.
package pgstore

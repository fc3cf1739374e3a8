// Package sqldb is the PostgreSQL idem.Store for code on database/sql:
// pgx's stdlib driver (github.com/jackc/pgx/v5/stdlib), lib/pq, or sqlx
// over either (pass the *sql.DB that sqlx.DB embeds). It is pgstore's twin:
// the same table, migrations and advisory lock keys, so a pgstore process
// and a sqldb process on one table replay each other's records and refuse
// each other's keys in flight, and a service can move from one to the other
// without a migration.
//
// The key's claim, the caller's effect and the recorded result commit in one
// PostgreSQL transaction (atomic mode). The work passed to idem.Guard.Do
// writes its effect through the *sql.Tx that TxFrom returns:
//
//	db, _ := sql.Open("pgx", "postgres://…") // import _ "github.com/jackc/pgx/v5/stdlib"
//	db.SetMaxOpenConns(20)
//	store, _ := sqldb.New(ctx, db, nil) // applies the migrations
//	guard, _ := idem.New(store, nil)
//	res, replayed, err := guard.Do(ctx, req, func(ctx context.Context) (idem.Result, error) {
//		tx, _ := sqldb.TxFrom(ctx)
//		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2`, amount, from)
//		…
//	})
//
// The Guard commits the *sql.Tx with the record, or rolls it back: the work
// must not end it itself. If it does (Commit, Rollback, or an Exec of
// COMMIT or ROLLBACK), no record is written, what the work committed stays
// committed without one, and the Guard returns an error that Transient
// calls permanent.
//
// # What the store guarantees
//
// The record, the effect and the result commit together or not at all; a
// key whose transaction is open is refused at once with idem.ErrInFlight,
// and freed as soon as the server ends that transaction; a host that
// vanished without a reset holds it at most
// Config.IdleInTransactionTimeout. The transaction outlives the caller's
// context, so that a work that succeeded is committed even if the caller
// gave up. Failures match idem.ErrUnavailable and keep the driver's error.
//
// # Configuration
//
// Config's zero value is the default; its fields mean what pgstore.Config's
// do. database/sql cannot pipeline, so each statement is a round trip: a
// first execution costs three more than a plain transaction (pgstore: none).
// When db has no idle connection left, a replay or a refusal waits for one
// unless Config.ProbeDB gives the store a second handle to ask on.
//
// docs/POSTGRES.md explains how the store works and why: the statements
// and their round trips, cancellation, faults, abandoned work, pool sizing,
// durability and sweeping.
package sqldb

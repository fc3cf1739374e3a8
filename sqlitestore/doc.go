// Package sqlitestore is idem's embedded default store: an idem.Store on a
// SQLite database file, through the pure-Go driver modernc.org/sqlite (no
// cgo, nothing to install).
//
// # Atomic mode
//
// The work passed to idem.Guard.Do runs in a *sql.Tx of the store's database;
// TxFrom(ctx) returns it. Write the effect through that transaction (tables
// of your own live in the same file; create them through Store.DB). The
// record of the key and the work's effect commit together or not at all.
//
// A call goes through these steps:
//
//  1. A process-local try-lock on (scope, key). Every writer of the key in
//     this process holds it until its transaction has ended.
//  2. A plain read of the record (a WAL snapshot taken after the lock). A
//     live record is replayed at once; it is final, so a caller that did not
//     get the lock answers from it too. A caller without the lock and
//     without a record gets idem.ErrInFlight at once.
//  3. The process's writer slot, then BEGIN IMMEDIATE: SQLite has one writer
//     at a time, and a transaction that starts as a read cannot later
//     become a write under concurrency (SQLITE_BUSY), so the write lock is
//     taken at BEGIN.
//  4. The work runs in that transaction; the record is written with an
//     upsert that replaces only an expired row (the (scope, key) primary key
//     is the final arbiter); COMMIT; the locks are released.
//
// SQLite rolls a whole transaction back by itself after some failed
// statements (an interrupt when the work's ctx ends mid-statement, a full
// disk, out of memory) and goes on in autocommit. So that a work that
// ignored such an error never gets its record committed on its own, Begin
// opens a savepoint and Commit releases it before writing the record: if
// the transaction is gone, so is the savepoint, and nothing is recorded.
// Statements the work runs after such a failure run in autocommit and
// commit on their own, which no store can undo: a work must return the
// error of any statement that fails.
// The transaction is detached from ctx's cancellation (the guard commits a
// work that has succeeded even if its caller has given up); the wait for a
// connection and the work's own statements still obey ctx.
//
// A replay costs one read and no write; a first execution costs one read,
// the work's statements, one upsert and the commit.
//
// # One process per database file
//
// The in-flight try-lock lives in the process. Several processes on one file
// stay correct in what commits (BEGIN IMMEDIATE serialises them and the
// primary key rejects a second record, so a duplicate's effect is rolled back
// and the first result replayed), but a duplicate from another process may
// run its work before being rolled back, and waits for the write lock (up to
// Config.BusyTimeout) instead of being refused at once. Run one process per
// database file, or use pgstore.
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL by default: a commit
// that returned survives a process crash and a power loss. With
// Config.Synchronous = "NORMAL" a commit survives a process crash but the
// last commits may be lost on power loss (the database stays consistent:
// an effect and its record are lost together). See docs/BENCHMARKS.md for
// what each level costs.
//
// # Schema
//
// Open creates or migrates the schema (table idem_records, versioned in
// idem_schema_version) inside a write transaction, so concurrent openers
// migrate once.
package sqlitestore

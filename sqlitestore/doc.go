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
//
// The transaction is detached from ctx's cancellation (the guard commits a
// work that has succeeded even if its caller has given up); the wait for a
// connection and the work's own statements still obey ctx, and Commit
// returns by ctx's deadline even when COMMIT hangs on the disk (its key and
// the writer slot are then released and its outcome is unknown, as with a
// database server that drops the connection during COMMIT; see
// docs/SQLITE.md).
//
// A replay costs one read and no write; a first execution costs one read,
// the work's statements, one upsert and the commit.
//
// # Leased mode
//
// A Store is also an idem.LeasedStore and an idem.LeasedTxStore: a pending
// record is a row whose expires_at is idem.PendingExpiresAt (so atomic mode
// answers it in flight and the sweeper keeps it), its recovery points are
// rows of idem_steps, and every leased write is one BEGIN IMMEDIATE
// transaction under the writer slot, fenced by the record's token. A local
// step (idem.Run.LocalStep) runs in such a transaction, which TxFrom(ctx)
// returns as it does for atomic work. See docs/SQLITE.md, "Leased mode".
//
// # One writing process per database file
//
// The in-flight try-lock lives in the process, so one process writes a
// database file, and Open enforces it: it takes an exclusive lock on the
// file "<db>-lock" beside the database (flock on Unix, a file opened
// without sharing on Windows) and fails with ErrLocked, naming the file and
// the holder's process id, while another process holds it. Close releases
// the lock, and so does the death of the process however it dies, so a
// killed server restarts at once. Within a process, every Store of one file
// shares the lock, the in-flight keys and the writer slot, whatever name
// (symlink, relative path, hard link) it was opened by. For several
// processes on one database, use pgstore.
//
// Tools open the file beside a running server with Config.ReadOnly (no
// lock, no migration, reads only: idem inspect), or when it is stopped
// with Config.SkipMigrate (writes without touching the schema: idem
// sweep). Neither creates a missing file.
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
// Open creates the file (mode 0600) if needed and creates or migrates the
// schema (tables idem_records and idem_steps, versioned in
// idem_schema_version) inside a write transaction. With Config.ReadOnly or
// Config.SkipMigrate it only checks that the file holds SchemaVersion and
// fails with ErrSchema otherwise.
package sqlitestore

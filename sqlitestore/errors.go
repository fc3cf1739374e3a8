package sqlitestore

import (
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors of Open and of a read-only store. They are wrapped with details;
// test them with errors.Is.
var (
	// ErrLocked means that another process has the database file open for
	// writing. One writing process per file is enforced (see the package
	// documentation); the error names the file and, where it is known,
	// the holder's process id.
	ErrLocked = errors.New("sqlitestore: database file in use by another process")

	// ErrReadOnly is returned by the writes of a store opened with
	// Config.ReadOnly.
	ErrReadOnly = errors.New("sqlitestore: store opened read-only")

	// ErrSchema means that Open with Config.ReadOnly or Config.SkipMigrate
	// found no idem schema in the file, or another version of it than
	// SchemaVersion.
	ErrSchema = errors.New("sqlitestore: database does not hold this package's schema")
)

func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

func isConstraint(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

func isNotADatabase(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB
}

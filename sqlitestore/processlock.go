package sqlitestore

import "fmt"

// lockSuffix names the lock file beside the database: "<db>-lock". It is
// never deleted (deleting a lock file that another process may be opening
// would let two processes lock two different files).
const lockSuffix = "-lock"

// lockedError is Open's error when another process holds the file; pid is
// the holder's, or 0 when unknown.
func lockedError(db, lock string, pid int) error {
	holder := "another process"
	if pid > 0 {
		holder = fmt.Sprintf("process %d", pid)
	}
	return fmt.Errorf("%w: %s is open for writing in %s (lock file %s); run one writing process per database file, or open with Config.ReadOnly to read it meanwhile",
		ErrLocked, db, holder, lock)
}

package sqlitestore

// SetCommitHook makes every COMMIT of s run hook first; an error from hook
// rolls the transaction back instead. It stands for a COMMIT that hangs on
// the disk or fails. Set it before the store is used.
func SetCommitHook(s *Store, hook func() error) { s.commitHook = hook }

// WriterSlotHeld reports whether a transaction of s's file holds the
// process's writer slot.
func WriterSlotHeld(s *Store) bool { return len(s.file.writer) > 0 }

// Migrations returns the schema's migrations, so that a test can build a
// database file of an older version.
func Migrations() []string { return migrations }

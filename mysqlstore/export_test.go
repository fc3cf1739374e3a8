package mysqlstore

// SetCommitHook makes s call hook before each COMMIT of atomic work, in the
// goroutine that runs it: a hook that blocks is a COMMIT that hangs, one
// that fails a COMMIT that fails.
func SetCommitHook(s *Store, hook func() error) { s.commitHook = hook }

// LatestVersion is the version of the last migration.
func LatestVersion() int { return migrations[len(migrations)-1].version }

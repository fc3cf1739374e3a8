package mysqlstore

// SetCommitHook makes s call hook before each COMMIT of atomic work, in the
// goroutine that runs it: a hook that blocks is a COMMIT that hangs, one
// that fails a COMMIT that fails.
func SetCommitHook(s *Store, hook func() error) { s.commitHook = hook }

// LatestVersion is the version of the last migration.
func LatestVersion() int { return migrations[len(migrations)-1].version }

// Path is how s runs atomic work: "deferred" (CALLs that begin and end
// the transaction, on Open's connections), "procedures" (CALLs inside
// database/sql's transaction) or "statements".
func Path(s *Store) string {
	switch {
	case s.procs.Load() && s.deferred:
		return "deferred"
	case s.procs.Load():
		return "procedures"
	}
	return "statements"
}

// ProcedureStatements are the CREATE PROCEDURE statements of table t of
// database d.
func ProcedureStatements(d, t string) []string { return procedureStatements(newNames(d, t)) }

package sqldb

// SetLockKey replaces the lock-key hash of s, to force collisions.
func SetLockKey(s *Store, f func(scope, key string) int64) { s.lockKey = f }

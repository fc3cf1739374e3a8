package sqldb

import (
	"context"
	"database/sql"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

// claim takes the key's lock in tx and reads its record after the lock was
// granted, with lock, the statement ConnCheck chose. database/sql cannot
// pipeline, so it calls the begin function of migration 3, which does both
// in one statement, one round trip (pgschema.BeginCall). On a table
// without the function (SkipMigrate before migration 3), it sends the lock
// and the read as two statements, the read never fused with the lock.
func (s *Store) claim(ctx context.Context, tx *sql.Tx, lock string, p *idem.BeginParams) (locked bool, txStart time.Time, rec *idem.Record, err error) {
	lockKey := s.lockKey(p.Scope, p.Key)
	if !s.noBeginFunc.Load() {
		q, args := s.sql.BeginCall(lockKey, p.Scope, p.Key, lock == s.sql.Lock)
		return pgschema.ScanBegin(tx.QueryRowContext(ctx, q, args...), p.Scope, p.Key)
	}
	if err := tx.QueryRowContext(ctx, lock, lockKey).Scan(&locked, new(string), &txStart); err != nil {
		return false, time.Time{}, nil, err
	}
	rec, err = pgschema.ScanRecord(tx.QueryRowContext(ctx, s.sql.Select, p.Scope, p.Key), p.Scope, p.Key)
	return locked, txStart, rec, err
}

package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

const (
	recordColumns = `fingerprint, state, status, header, body, created_at, expires_at`
	selectRecord  = `SELECT ` + recordColumns + ` FROM idem_records WHERE scope = ? AND key = ?`
	upsertRecord  = `INSERT INTO idem_records (scope, key, ` + recordColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope, key) DO UPDATE SET
		  fingerprint = excluded.fingerprint, state = excluded.state,
		  status = excluded.status, header = excluded.header, body = excluded.body,
		  created_at = excluded.created_at, expires_at = excluded.expires_at
		WHERE idem_records.expires_at <= ?`
)

// prepare prepares the statements of the hot path once.
func (s *Store) prepare(ctx context.Context) error {
	var err error
	if s.read, err = s.db.PrepareContext(ctx, selectRecord); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	if s.cfg.ReadOnly {
		return nil
	}
	if s.upsert, err = s.db.PrepareContext(ctx, upsertRecord); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	if s.savepoint, err = s.db.PrepareContext(ctx, `SAVEPOINT idem_work`); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	if s.release, err = s.db.PrepareContext(ctx, `RELEASE idem_work`); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	return nil
}

// live returns the record for (scope, key) if it exists and has not expired
// at now, read through read (the store's prepared statement, or that
// statement in a transaction).
func live(ctx context.Context, read *sql.Stmt, scope, key string, now time.Time) (*idem.Record, error) {
	rec, err := lookup(ctx, read, scope, key)
	if errors.Is(err, idem.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if rec.Expired(now) {
		return nil, nil
	}
	return rec, nil
}

func lookup(ctx context.Context, read *sql.Stmt, scope, key string) (*idem.Record, error) {
	var (
		rec            = idem.Record{Scope: scope, Key: key}
		header         []byte
		created, expis int64
	)
	err := read.QueryRowContext(ctx, scope, key).Scan(&rec.Fingerprint, &rec.State, &rec.Result.Status, &header, &rec.Result.Body, &created, &expis)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, idem.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read record: %w", err)
	}
	if len(header) > 0 {
		if err := json.Unmarshal(header, &rec.Result.Header); err != nil {
			return nil, fmt.Errorf("sqlitestore: decode recorded header: %w", err)
		}
	}
	rec.CreatedAt = time.Unix(0, created).UTC()
	rec.ExpiresAt = time.Unix(0, expis).UTC()
	return &rec, nil
}

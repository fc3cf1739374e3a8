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
	// leasedColumns are leased mode's (see leased.go); an atomic record
	// has their defaults.
	leasedColumns = `token, lease_until, kind, input, attempts, last_error, ttl`
	selectRecord  = `SELECT ` + recordColumns + `, ` + leasedColumns + ` FROM idem_records WHERE scope = ? AND key = ?`
	// upsertRecord writes an atomic record, replacing only an expired one
	// (whose leased columns go back to their defaults; the token stays, so
	// that a later claim's token is still greater).
	upsertRecord = `INSERT INTO idem_records (scope, key, ` + recordColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope, key) DO UPDATE SET
		  fingerprint = excluded.fingerprint, state = excluded.state,
		  status = excluded.status, header = excluded.header, body = excluded.body,
		  created_at = excluded.created_at, expires_at = excluded.expires_at,
		  lease_until = NULL, kind = '', input = NULL, attempts = 0, last_error = '', ttl = 0
		WHERE idem_records.expires_at <= ?`
)

// prepare prepares the statements of the hot path once.
func (s *Store) prepare(ctx context.Context) error {
	var err error
	if s.read, err = s.db.PrepareContext(ctx, selectRecord); err != nil {
		return fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	s.stmts = make(map[string]*sql.Stmt, len(leasedQueries))
	for _, q := range leasedQueries {
		if q != selectAbandoned && s.cfg.ReadOnly {
			continue
		}
		if s.stmts[q], err = s.db.PrepareContext(ctx, q); err != nil {
			return fmt.Errorf("sqlitestore: prepare: %w", err)
		}
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
	rec, err := scanRecord(read.QueryRowContext(ctx, scope, key), scope, key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, idem.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read record: %w", err)
	}
	return rec, nil
}

// scanRecord scans a row of recordColumns and leasedColumns, then into
// extra the columns that follow them, if any.
func scanRecord(row interface{ Scan(...any) error }, scope, key string, extra ...any) (*idem.Record, error) {
	var (
		rec            = idem.Record{Scope: scope, Key: key}
		header         []byte
		created, expis int64
		leaseUntil     sql.NullInt64
		ttl            int64
	)
	dest := append([]any{&rec.Fingerprint, &rec.State, &rec.Result.Status, &header, &rec.Result.Body, &created, &expis,
		&rec.Token, &leaseUntil, &rec.Kind, &rec.Input, &rec.Attempts, &rec.LastError, &ttl}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if len(header) > 0 {
		if err := json.Unmarshal(header, &rec.Result.Header); err != nil {
			return nil, fmt.Errorf("decode recorded header: %w", err)
		}
	}
	rec.CreatedAt = time.Unix(0, created).UTC()
	rec.ExpiresAt = time.Unix(0, expis).UTC()
	rec.TTL = time.Duration(ttl)
	if leaseUntil.Valid {
		rec.LeaseUntil = time.Unix(0, leaseUntil.Int64).UTC()
	}
	return &rec, nil
}

// encodeHeader is the stored form of a result's header: JSON, or NULL when
// there is none.
func encodeHeader(h map[string][]string) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: encode header: %w", err)
	}
	return b, nil
}

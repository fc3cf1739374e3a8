package pgschema

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idem"
)

// ScanRecord reads the row of Statements.Select; no row is a nil record
// and a nil error. It takes pgx's and database/sql's "no rows" errors
// alike (pgx.ErrNoRows matches sql.ErrNoRows).
func ScanRecord(row Row, scope, key string) (*idem.Record, error) {
	var (
		rec     = idem.Record{Scope: scope, Key: key}
		state   string
		headers []byte
	)
	err := row.Scan(&rec.Fingerprint, &state, &rec.Result.Status, &headers, &rec.Result.Body, &rec.CreatedAt, &rec.ExpiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return finish(&rec, state, headers)
}

// ScanProbe reads the row of Statements.Probe: whether the lock was free,
// and the record, nil when there is none.
func ScanProbe(row Row, scope, key string) (locked bool, rec *idem.Record, err error) {
	var f nullRecord
	if err := row.Scan(append([]any{&locked}, f.dest()...)...); err != nil {
		return false, nil, err
	}
	rec, err = f.record(scope, key)
	return locked, rec, err
}

// nullRecord receives the record columns of a LEFT JOIN, all NULL when
// the key has no record.
type nullRecord struct {
	fingerprint, state sql.NullString
	status             sql.NullInt64
	headers, body      []byte
	created, expires   sql.NullTime
}

func (f *nullRecord) dest() []any {
	return []any{&f.fingerprint, &f.state, &f.status, &f.headers, &f.body, &f.created, &f.expires}
}

// record is the record read, nil when the LEFT JOIN found none.
func (f *nullRecord) record(scope, key string) (*idem.Record, error) {
	if !f.fingerprint.Valid {
		return nil, nil
	}
	r := &idem.Record{
		Scope:       scope,
		Key:         key,
		Fingerprint: f.fingerprint.String,
		Result:      idem.Result{Status: int(f.status.Int64), Body: f.body},
		CreatedAt:   f.created.Time,
		ExpiresAt:   f.expires.Time,
	}
	return finish(r, f.state.String, f.headers)
}

func finish(rec *idem.Record, state string, headers []byte) (*idem.Record, error) {
	rec.State = idem.State(state)
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.ExpiresAt = rec.ExpiresAt.UTC()
	if headers != nil {
		if err := json.Unmarshal(headers, &rec.Result.Header); err != nil {
			return nil, fmt.Errorf("headers of %s: %w", RecordName(rec.Scope, rec.Key), err)
		}
	}
	return rec, nil
}

// InsertArgs returns the parameters of Statements.Insert for r under
// (scope, key), the key the transaction locked, written by the
// transaction that Lock found started at txStart. The headers go
// as JSON text (nil for NULL): pgx and every database/sql driver send a
// string as it is, where some send []byte as bytea.
func InsertArgs(scope, key string, r *idem.Record, txStart time.Time) ([]any, error) {
	headers, err := headersArg(r.Result.Header)
	if err != nil {
		return nil, err
	}
	body := r.Result.Body
	if body == nil {
		body = []byte{}
	}
	state := r.State
	if state == "" {
		state = idem.StateCompleted
	}
	return []any{scope, key, r.Fingerprint, string(state), r.Result.Status, headers, body, r.CreatedAt, r.ExpiresAt, txStart}, nil
}

// headersArg is the headers parameter of a statement: JSON text, or nil
// (NULL) for none.
func headersArg(h map[string][]string) (any, error) {
	if h == nil {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	return string(b), nil
}

// Answer decides a Begin, or a probe, from what it saw: whether it got the
// key's lock and the record it read after the lock. A live record is final
// and is the answer whether or not the lock was granted; without one, a
// lock held elsewhere is idem.ErrInFlight. Both nil mean the key is free
// and the caller holds it: go on with the transaction.
func Answer(rec *idem.Record, locked bool, now time.Time) (*idem.Record, error) {
	switch {
	case rec != nil && !rec.Expired(now):
		return rec, nil
	case !locked:
		return nil, idem.ErrInFlight
	}
	return nil, nil
}

// RecordName names the record (scope, key) in an error by the digests
// spans and log lines carry: a scope may hold a principal, and errors end
// up in logs.
func RecordName(scope, key string) string {
	return "(scope_sha256 " + idem.KeyHash(scope) + ", key_sha256 " + idem.KeyHash(key) + ")"
}

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Records is what the records table holds and takes on disk after
// Config.LiveRecords were written into it, before the measurement.
type Records struct {
	Live     int     `json:"live"`    // live records written before the run
	Seconds  float64 `json:"seconds"` // how long writing them took, analysis included
	PerRow   float64 `json:"bytes_per_record"`
	Heap     float64 `json:"heap_bytes_per_record"`    // PostgreSQL: the table (with TOAST); SQLite: the whole file
	Indexes  float64 `json:"indexes_bytes_per_record"` // PostgreSQL: all its indexes
	ByIndex  []Index `json:"by_index,omitempty"`       // PostgreSQL: each index
	RowBytes float64 `json:"row_bytes,omitempty"`      // PostgreSQL: avg(pg_column_size) of a row
	Note     string  `json:"note,omitempty"`
}

// Index is one index of the records table and its size per record.
type Index struct {
	Name      string  `json:"name"`
	PerRecord float64 `json:"bytes_per_record"`
}

// prefillBatch is how many records one statement of the prefill writes.
const prefillBatch = 500_000

// The prefilled records look like the service's own: scope "prefill"
// (no client of the run uses it), a UUID key, a SHA-256 hex fingerprint,
// the header and a body of a POST /transfers answer, created within the
// last day and expiring within the next (a table in its steady state at
// a 24 h TTL).
const pgPrefill = `INSERT INTO idem_records (scope, key, fingerprint, state, status, headers, body, created_at, expires_at)
SELECT 'prefill', gen_random_uuid()::text, md5(g::text) || md5((g + 1)::text), 'completed', 201,
	'{"Content-Type": ["application/json"]}'::jsonb,
	convert_to('{"id":' || g || ',"from":"alice","to":"bob","amount":100,"created_at":"2026-12-02T01:00:00.123456Z"}', 'UTF8'),
	now() - (g % 86400000) * interval '1 ms', now() + interval '1 day' - (g % 86400000) * interval '1 ms'
FROM generate_series($1::bigint, $2::bigint) g`

// prefillPostgres writes n live records into the records table of the
// pool's schema in batches, then VACUUM ANALYZEs it and measures it.
func prefillPostgres(ctx context.Context, pool *pgxpool.Pool, schema string, n int) (*Records, error) {
	start := time.Now()
	for lo := 1; lo <= n; lo += prefillBatch {
		hi := min(n, lo+prefillBatch-1)
		if _, err := pool.Exec(ctx, pgPrefill, lo, hi); err != nil {
			return nil, fmt.Errorf("bench: prefill: %w", err)
		}
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE idem_records`); err != nil {
		return nil, fmt.Errorf("bench: prefill: %w", err)
	}
	r := &Records{Live: n, Seconds: time.Since(start).Seconds()}
	if n == 0 {
		return r, nil
	}
	table := pgx.Identifier{schema, "idem_records"}.Sanitize()
	var heap, idx int64
	if err := pool.QueryRow(ctx, `SELECT pg_table_size($1::regclass), pg_indexes_size($1::regclass)`, table).Scan(&heap, &idx); err != nil {
		return nil, fmt.Errorf("bench: records size: %w", err)
	}
	per := func(b int64) float64 { return float64(b) / float64(n) }
	r.Heap, r.Indexes, r.PerRow = per(heap), per(idx), per(heap+idx)
	rows, err := pool.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = $1::regclass ORDER BY c.relname`, table)
	if err != nil {
		return nil, fmt.Errorf("bench: records size: %w", err)
	}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return nil, err
		}
		r.ByIndex = append(r.ByIndex, Index{Name: name, PerRecord: per(size)})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := pool.QueryRow(ctx, `SELECT avg(pg_column_size(t.*)) FROM (SELECT * FROM idem_records LIMIT 100000) t`).Scan(&r.RowBytes); err != nil {
		return nil, fmt.Errorf("bench: row size: %w", err)
	}
	return r, nil
}

// sqlitePrefill is pgPrefill in SQLite's form (times in Unix nanoseconds).
const sqlitePrefill = `WITH RECURSIVE g(x) AS (SELECT ?1 UNION ALL SELECT x + 1 FROM g WHERE x < ?2)
INSERT INTO idem_records (scope, key, fingerprint, state, status, header, body, created_at, expires_at)
SELECT 'prefill', lower(hex(randomblob(16))), lower(hex(randomblob(32))), 'completed', 201,
	CAST('{"Content-Type":["application/json"]}' AS BLOB),
	CAST('{"id":' || x || ',"from":"alice","to":"bob","amount":100,"created_at":"2026-12-02T01:00:00.123456Z"}' AS BLOB),
	?3 - (x % 86400000) * 1000000, ?3 + 86400000000000 - (x % 86400000) * 1000000
FROM g`

// prefillSQLite writes n live records into the file's records table and
// measures the file's growth.
func prefillSQLite(ctx context.Context, db *sql.DB, n int) (*Records, error) {
	size := func() (int64, error) {
		var pages, pageSize int64
		if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
			return 0, err
		}
		err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize)
		return pages * pageSize, err
	}
	before, err := size()
	if err != nil {
		return nil, fmt.Errorf("bench: prefill: %w", err)
	}
	start := time.Now()
	now := time.Now().UnixNano()
	for lo := 1; lo <= n; lo += prefillBatch {
		hi := min(n, lo+prefillBatch-1)
		if _, err := db.ExecContext(ctx, sqlitePrefill, lo, hi, now); err != nil {
			return nil, fmt.Errorf("bench: prefill: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx, `ANALYZE`); err != nil {
		return nil, fmt.Errorf("bench: prefill: %w", err)
	}
	r := &Records{Live: n, Seconds: time.Since(start).Seconds(), Note: "SQLite: the file's growth, table and indexes together (WITHOUT ROWID: the primary key is the table)"}
	if n == 0 {
		return r, nil
	}
	after, err := size()
	if err != nil {
		return nil, fmt.Errorf("bench: prefill: %w", err)
	}
	r.PerRow = float64(after-before) / float64(n)
	r.Heap = r.PerRow
	return r, nil
}

package pgschema

import (
	"database/sql"
	"errors"
	"time"

	"github.com/idemkit/idem"
)

// leasedColumns are the columns a record is read from in leased mode, in
// the order ScanLeased scans them: the atomic ones, then those of
// migrations 2 and 4.
const leasedColumns = `scope, key, ` + recordColumns + `, token, lease_until, kind, input, attempts, last_error, ttl_us`

// fence is the condition of every write of a lease holder: the record of
// ($1 scope, $2 key) is pending and its token is still $3.
const fence = `scope = $1 AND key = $2 AND state = 'pending' AND token = $3`

// LeasedStatements is the SQL of leased mode (idem.LeasedStore), built
// once per store. Every write of a holder is fenced: it applies only to
// the record of ($1 scope, $2 key) while it is pending with token $3,
// atomically with that check, and affects no row otherwise.
type LeasedStatements struct {
	// Claim claims the record of ($1 scope, $2 key) for fingerprint $3 in
	// one statement, with kind $4, input $5 and TTL $9 (microseconds) for
	// a new record, at $6 (now), leasing it until $7, with $8 the new
	// token of a new record ($6 in microseconds since the epoch). The
	// INSERT … ON CONFLICT DO UPDATE writes a new pending record
	// (Attempts 1, token GREATEST($8, old token + 1)) where there is none
	// or the completed one has expired, and takes over a pending record
	// whose lease has ended and whose fingerprint is $3 (token + 1,
	// Attempts + 1, its kind, input and TTL kept). The
	// conflicting row is locked and the WHERE is evaluated on its newest
	// version, so of two concurrent claims exactly one writes. It returns
	// the record (ScanLeased) when it claimed, no row otherwise. A new
	// record deletes the key's old steps in the same statement.
	Claim string

	// Steps reads the steps of ($1 scope, $2 key) in the order they were
	// first saved. Run after Claim in the same implicit transaction, its
	// snapshot sees every step committed before the claim.
	Steps string

	// Select reads the record of ($1 scope, $2 key) for ScanLeased.
	Select string

	// Heartbeat sets lease_until to $4 (fenced).
	Heartbeat string

	// SaveStep saves step $4 with output $5 at $6 (fenced): the record row
	// is locked FOR UPDATE in the same statement, so no claim takes it
	// over before the step commits. A saved name gets its new output and
	// keeps its place.
	SaveStep string

	// Complete makes the record completed (fenced) with status $4,
	// headers $5 (jsonb as text, NULL for none), body $6, expiring at $7.
	Complete string

	// DeleteSteps deletes the steps of ($1 scope, $2 key) if the record
	// is completed with token $3: sent after Complete in the same implicit
	// transaction, so that it sees every step committed before, and
	// deletes nothing if Complete was fenced.
	DeleteSteps string

	// Release sets lease_until to $4 and last_error to $5 (fenced).
	Release string

	// Abandoned reads at most $2 pending records whose lease ended at $1,
	// the longest ended first, through the partial index on lease_until.
	Abandoned string

	// BeginStep locks the record row FOR UPDATE (fenced) as the first
	// statement of a local step's transaction, and sets for that
	// transaction what Statements.Lock sets (client_connection_check_interval
	// and idle_in_transaction_session_timeout), for the same reasons: a
	// vanished holder must not keep the row locked. It returns a text to
	// discard and transaction_timestamp(); no row means fenced.
	BeginStep string

	// BeginStepPlain is BeginStep without the connection check, for the
	// servers that get Statements.LockPlain.
	BeginStepPlain string

	// CommitStep writes step $3 with output $4 at $5 in the local step's
	// transaction, whose transaction_timestamp() BeginStep returned as $6:
	// in any other transaction the name becomes NULL and the INSERT fails
	// with not_null_violation (IsOtherTx), as Statements.Insert does.
	CommitStep string
}

// NewLeasedStatements returns leased mode's statements on the tables n
// names. idle is as in NewStatements.
func NewLeasedStatements(n Names, idle time.Duration) LeasedStatements {
	setIdle := idleSetting(idle)
	pending := `'` + idem.PendingExpiresAt.Format(time.RFC3339) + `'::timestamptz`
	stepUpsert := ` ON CONFLICT (scope, key, name) DO UPDATE SET output = excluded.output`
	return LeasedStatements{
		Claim: `WITH c AS (
	INSERT INTO ` + n.Table + ` AS r (scope, key, fingerprint, state, status, headers, body, created_at, expires_at,
		token, lease_until, kind, input, attempts, last_error, ttl_us)
	VALUES ($1, $2, $3, 'pending', 0, NULL, '', $6, ` + pending + `, $8, $7, $4, $5, 1, '', $9)
	ON CONFLICT (scope, key) DO UPDATE SET
		fingerprint = excluded.fingerprint,
		state = 'pending', status = 0, headers = NULL, body = '',
		expires_at = excluded.expires_at,
		lease_until = excluded.lease_until,
		created_at = CASE WHEN r.state = 'pending' THEN r.created_at ELSE excluded.created_at END,
		token = CASE WHEN r.state = 'pending' THEN r.token + 1 ELSE greatest(excluded.token, r.token + 1) END,
		kind = CASE WHEN r.state = 'pending' THEN r.kind ELSE excluded.kind END,
		input = CASE WHEN r.state = 'pending' THEN r.input ELSE excluded.input END,
		attempts = CASE WHEN r.state = 'pending' THEN r.attempts + 1 ELSE 1 END,
		last_error = CASE WHEN r.state = 'pending' THEN r.last_error ELSE '' END,
		ttl_us = CASE WHEN r.state = 'pending' THEN r.ttl_us ELSE excluded.ttl_us END
	WHERE (r.state <> 'pending' AND r.expires_at <= $6)
		OR (r.state = 'pending' AND r.lease_until <= $6 AND r.fingerprint = $3)
	RETURNING ` + leasedColumns + `
), d AS (
	DELETE FROM ` + n.Steps + ` AS s USING c WHERE c.attempts = 1 AND s.scope = $1 AND s.key = $2
)
SELECT ` + leasedColumns + ` FROM c`,
		Steps:     `SELECT name, output FROM ` + n.Steps + ` WHERE scope = $1 AND key = $2 ORDER BY seq`,
		Select:    `SELECT ` + leasedColumns + ` FROM ` + n.Table + ` WHERE scope = $1 AND key = $2`,
		Heartbeat: `UPDATE ` + n.Table + ` SET lease_until = $4 WHERE ` + fence,
		SaveStep: `WITH f AS (SELECT FROM ` + n.Table + ` WHERE ` + fence + ` FOR UPDATE)
INSERT INTO ` + n.Steps + ` (scope, key, name, output, created_at) SELECT $1, $2, $4, $5, $6 FROM f` + stepUpsert,
		Complete: `UPDATE ` + n.Table + ` SET state = 'completed', status = $4, headers = $5, body = $6, expires_at = $7, last_error = ''
WHERE ` + fence,
		DeleteSteps: `DELETE FROM ` + n.Steps + ` WHERE scope = $1 AND key = $2
AND EXISTS (SELECT FROM ` + n.Table + ` WHERE scope = $1 AND key = $2 AND state = 'completed' AND token = $3)`,
		Release:   `UPDATE ` + n.Table + ` SET lease_until = $4, last_error = $5 WHERE ` + fence,
		Abandoned: `SELECT ` + leasedColumns + ` FROM ` + n.Table + ` WHERE state = 'pending' AND lease_until <= $1 ORDER BY lease_until LIMIT $2`,
		BeginStep: `SELECT set_config('client_connection_check_interval', '` + ConnectionCheckInterval + `', true) || ` + setIdle +
			`, transaction_timestamp() FROM ` + n.Table + ` WHERE ` + fence + ` FOR UPDATE`,
		BeginStepPlain: `SELECT ` + setIdle + `, transaction_timestamp() FROM ` + n.Table + ` WHERE ` + fence + ` FOR UPDATE`,
		CommitStep: `INSERT INTO ` + n.Steps + ` (scope, key, name, output, created_at)
VALUES ($1, $2, CASE WHEN transaction_timestamp() = $6::timestamptz THEN $3::text END, $4, $5)` + stepUpsert,
	}
}

// ScanLeased reads a row of LeasedStatements.Claim, Select or Abandoned;
// no row is a nil record and a nil error.
func ScanLeased(row Row) (*idem.Record, error) {
	var (
		rec     idem.Record
		state   string
		headers []byte
		lease   sql.NullTime
		ttl     int64
	)
	err := row.Scan(&rec.Scope, &rec.Key, &rec.Fingerprint, &state, &rec.Result.Status, &headers, &rec.Result.Body,
		&rec.CreatedAt, &rec.ExpiresAt, &rec.Token, &lease, &rec.Kind, &rec.Input, &rec.Attempts, &rec.LastError, &ttl)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if lease.Valid {
		rec.LeaseUntil = lease.Time.UTC()
	}
	rec.TTL = time.Duration(ttl) * time.Microsecond
	return finish(&rec, state, headers)
}

// CompleteArgs returns the parameters of LeasedStatements.Complete: the
// fenced lease, then the result and the expiry.
func CompleteArgs(l idem.Lease, res idem.Result, expiresAt time.Time) ([]any, error) {
	headers, err := headersArg(res.Header)
	if err != nil {
		return nil, err
	}
	body := res.Body
	if body == nil {
		body = []byte{}
	}
	return []any{l.Scope, l.Key, l.Token, res.Status, headers, body, expiresAt}, nil
}

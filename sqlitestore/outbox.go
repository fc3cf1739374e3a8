package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem/outbox"
)

// outboxSchema is migration 5: the outbox that outbox.Stage writes in the
// work's transaction and a relay reads. seq is the staging order (never
// reused, so that a sweep cannot reorder); id is outbox.ID, unique, so
// that staging an intent's message again is a no-op. Times are Unix
// nanoseconds; a message is pending while sent_at and parked_at are NULL.
const outboxSchema = `CREATE TABLE idem_outbox (
		seq           INTEGER PRIMARY KEY AUTOINCREMENT,
		id            TEXT    NOT NULL UNIQUE,
		scope         TEXT    NOT NULL,
		key           TEXT    NOT NULL,
		name          TEXT    NOT NULL,
		subject       TEXT    NOT NULL,
		body          BLOB    NOT NULL,
		headers       TEXT,
		partition_key TEXT    NOT NULL DEFAULT '',
		staged_at     INTEGER NOT NULL,
		attempts      INTEGER NOT NULL DEFAULT 0,
		last_error    TEXT    NOT NULL DEFAULT '',
		sent_at       INTEGER,
		parked_at     INTEGER
	);
	CREATE INDEX idem_outbox_pend ON idem_outbox (seq) WHERE sent_at IS NULL;
	CREATE INDEX idem_outbox_sent ON idem_outbox (sent_at) WHERE sent_at IS NOT NULL;`

const outboxInsert = `INSERT INTO idem_outbox (id, scope, key, name, subject, body, headers, partition_key, staged_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`

// The transactions of atomic work and of local steps stage messages
// (outbox.Stage).
var (
	_ outbox.Stager = (*Tx)(nil)
	_ outbox.Stager = (*stepTx)(nil)
)

// OutboxIntent implements outbox.Stager: the key the transaction records.
func (t *Tx) OutboxIntent() (scope, key string) { return t.key.scope, t.key.key }

// StageOutbox implements outbox.Stager: it inserts msgs in the
// transaction.
func (t *Tx) StageOutbox(ctx context.Context, msgs []outbox.Staged) error {
	if t.ended {
		return sql.ErrTxDone
	}
	return stageOutbox(ctx, t.tx, msgs)
}

// OutboxIntent implements outbox.Stager: the leased record's key.
func (st *stepTx) OutboxIntent() (scope, key string) { return st.lease.Scope, st.lease.Key }

// StageOutbox implements outbox.Stager, as Tx's does.
func (st *stepTx) StageOutbox(ctx context.Context, msgs []outbox.Staged) error {
	if st.ended {
		return sql.ErrTxDone
	}
	return stageOutbox(ctx, st.tx, msgs)
}

func stageOutbox(ctx context.Context, tx *sql.Tx, msgs []outbox.Staged) error {
	now := time.Now().UnixNano()
	for _, m := range msgs {
		var hdr any
		if len(m.Headers) > 0 {
			b, err := json.Marshal(m.Headers)
			if err != nil {
				return err
			}
			hdr = string(b)
		}
		body := m.Body
		if body == nil {
			body = []byte{}
		}
		if _, err := tx.ExecContext(ctx, outboxInsert, m.ID, m.Scope, m.Key, m.Name, m.Subject, body, hdr, m.PartitionKey, now); err != nil {
			return fmt.Errorf("sqlitestore: stage %s: %w", m.ID, err)
		}
	}
	return nil
}

// relaySlots holds one mutex per database file (by its fileState): the
// claim of a relay, so that two relays of one process never claim the
// same messages at once. Other processes cannot write the file while this
// one holds it (see Open), so one relay per file is the rule.
var relaySlots sync.Map // *fileState → *sync.Mutex

// Outbox returns the store's outbox as an outbox.Source, for an
// outbox.Relay in the process that holds the file. SQLite has one relay
// per file: a claim holds the file's relay slot until it ends, and a
// second claim meanwhile fails (the relay retries it). The relay polls
// (RelayConfig.PollInterval; reads are cheap). It fails on a read-only
// store.
func (s *Store) Outbox() *Outbox {
	return &Outbox{store: s}
}

// Outbox is a Store's outbox; see Store.Outbox.
type Outbox struct {
	store *Store
}

var _ outbox.Source = (*Outbox)(nil)

// ErrRelayBusy is returned by a claim while another relay of the same
// file holds one.
var ErrRelayBusy = errors.New("sqlitestore: another relay of this database file holds a claim (SQLite has one relay per file)")

// Claim implements outbox.Source. It reads without a transaction: only
// this claim marks messages, and the file's writer is free meanwhile.
func (o *Outbox) Claim(ctx context.Context, n int) (outbox.Claim, error) {
	s := o.store
	if s.file == nil {
		return nil, fmt.Errorf("sqlitestore: outbox: %w", ErrReadOnly)
	}
	v, _ := relaySlots.LoadOrStore(s.file, new(sync.Mutex))
	slot := v.(*sync.Mutex)
	if !slot.TryLock() {
		return nil, ErrRelayBusy
	}
	rows, err := s.db.QueryContext(ctx, `SELECT seq, id, subject, body, headers, partition_key, attempts FROM idem_outbox
		WHERE sent_at IS NULL AND parked_at IS NULL ORDER BY seq LIMIT ?`, n)
	if err != nil {
		slot.Unlock()
		return nil, unavailable("outbox claim", err)
	}
	defer rows.Close()
	c := &claim{o: o, slot: slot, seq: map[string]int64{}}
	for rows.Next() {
		var (
			seq int64
			e   outbox.Envelope
			hdr sql.NullString
		)
		if err := rows.Scan(&seq, &e.ID, &e.Subject, &e.Body, &hdr, &e.PartitionKey, &e.Attempt); err != nil {
			slot.Unlock()
			return nil, unavailable("outbox claim", err)
		}
		e.Attempt++
		if hdr.Valid && hdr.String != "" {
			if err := json.Unmarshal([]byte(hdr.String), &e.Headers); err != nil {
				slot.Unlock()
				return nil, fmt.Errorf("sqlitestore: outbox message %s: headers: %w", e.ID, err)
			}
		}
		c.msgs = append(c.msgs, e)
		c.seq[e.ID] = seq
	}
	if err := rows.Err(); err != nil {
		slot.Unlock()
		return nil, unavailable("outbox claim", err)
	}
	return c, nil
}

type claim struct {
	o     *Outbox
	slot  *sync.Mutex
	msgs  []outbox.Envelope
	seq   map[string]int64
	ended bool
}

func (c *claim) Messages() []outbox.Envelope { return c.msgs }

func (c *claim) end() {
	if !c.ended {
		c.ended = true
		c.slot.Unlock()
	}
}

func (c *claim) Finish(ctx context.Context, out *outbox.Outcome) ([]string, error) {
	if c.ended {
		return nil, errors.New("sqlitestore: outbox claim already ended")
	}
	defer c.end()
	if len(out.Sent) == 0 && len(out.Failed) == 0 {
		return nil, nil
	}
	s := c.o.store
	conn, tx, err := s.beginWrite(ctx, "outbox mark", false)
	if err != nil {
		return nil, unavailable("outbox mark", err)
	}
	now := out.Now.UnixNano()
	if len(out.Sent) > 0 {
		var b strings.Builder
		args := make([]any, 0, len(out.Sent)+1)
		args = append(args, now)
		for i, id := range out.Sent {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args = append(args, c.seq[id])
		}
		if _, err := tx.ExecContext(ctx, `UPDATE idem_outbox SET sent_at = ? WHERE sent_at IS NULL AND seq IN (`+b.String()+`)`, args...); err != nil {
			_ = s.endWrite(conn, tx)
			return nil, unavailable("outbox mark", err)
		}
	}
	var parked []string
	for _, f := range out.Failed {
		var p bool
		err := tx.QueryRowContext(ctx, `UPDATE idem_outbox SET attempts = attempts + 1, last_error = ?,
			parked_at = CASE WHEN attempts + 1 >= ? THEN ? END WHERE seq = ? RETURNING parked_at IS NOT NULL`,
			f.Error, out.MaxAttempts, now, c.seq[f.ID]).Scan(&p)
		if err != nil {
			_ = s.endWrite(conn, tx)
			return nil, unavailable("outbox mark", err)
		}
		if p {
			parked = append(parked, f.ID)
		}
	}
	if err := s.commitWrite(ctx, conn, tx); err != nil {
		return nil, unavailable("outbox mark", err)
	}
	return parked, nil
}

func (c *claim) Abort(context.Context) error {
	c.end()
	return nil
}

// Backlog implements outbox.Source.
func (o *Outbox) Backlog(ctx context.Context) (outbox.Backlog, error) {
	var (
		b      outbox.Backlog
		oldest sql.NullInt64
	)
	err := o.store.db.QueryRowContext(ctx, `SELECT
		count(CASE WHEN parked_at IS NULL THEN 1 END),
		min(CASE WHEN parked_at IS NULL THEN staged_at END),
		count(parked_at) FROM idem_outbox WHERE sent_at IS NULL`).Scan(&b.Pending, &oldest, &b.Parked)
	if err != nil {
		return b, unavailable("outbox backlog", err)
	}
	if oldest.Valid {
		b.OldestPending = time.Unix(0, oldest.Int64)
	}
	return b, nil
}

// Sweep implements outbox.Source.
func (o *Outbox) Sweep(ctx context.Context, before time.Time, limit int) (int, error) {
	return o.write(ctx, "outbox sweep", `DELETE FROM idem_outbox WHERE seq IN
		(SELECT seq FROM idem_outbox WHERE sent_at < ? ORDER BY sent_at LIMIT ?)`, before.UnixNano(), limit)
}

// Unpark implements outbox.Source.
func (o *Outbox) Unpark(ctx context.Context, id string) (bool, error) {
	n, err := o.write(ctx, "outbox unpark", `UPDATE idem_outbox SET parked_at = NULL, attempts = 0, last_error = ''
		WHERE id = ? AND sent_at IS NULL AND parked_at IS NOT NULL`, id)
	return n == 1, err
}

func (o *Outbox) write(ctx context.Context, op, q string, args ...any) (int, error) {
	s := o.store
	if s.file == nil {
		return 0, fmt.Errorf("sqlitestore: %s: %w", op, ErrReadOnly)
	}
	conn, tx, err := s.beginWrite(ctx, op, false)
	if err != nil {
		return 0, unavailable(op, err)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		_ = s.endWrite(conn, tx)
		return 0, unavailable(op, err)
	}
	n, _ := res.RowsAffected()
	if err := s.commitWrite(ctx, conn, tx); err != nil {
		return 0, unavailable(op, err)
	}
	return int(n), nil
}

// Parked implements outbox.Source.
func (o *Outbox) Parked(ctx context.Context, limit int) ([]outbox.ParkedMessage, error) {
	rows, err := o.store.db.QueryContext(ctx, `SELECT id, subject, body, headers, partition_key, attempts, staged_at, parked_at, last_error
		FROM idem_outbox WHERE sent_at IS NULL AND parked_at IS NOT NULL ORDER BY seq LIMIT ?`, limit)
	if err != nil {
		return nil, unavailable("outbox parked", err)
	}
	defer rows.Close()
	var out []outbox.ParkedMessage
	for rows.Next() {
		var (
			p                  outbox.ParkedMessage
			hdr                sql.NullString
			stagedAt, parkedAt int64
		)
		if err := rows.Scan(&p.ID, &p.Subject, &p.Body, &hdr, &p.PartitionKey, &p.Attempt, &stagedAt, &parkedAt, &p.LastError); err != nil {
			return nil, unavailable("outbox parked", err)
		}
		if hdr.Valid && hdr.String != "" {
			if err := json.Unmarshal([]byte(hdr.String), &p.Headers); err != nil {
				return nil, err
			}
		}
		p.StagedAt, p.ParkedAt = time.Unix(0, stagedAt), time.Unix(0, parkedAt)
		out = append(out, p)
	}
	return out, rows.Err()
}

package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idem/outbox"
)

// outboxMigration is migration 2: the outbox that outbox.Stage writes in
// the work's transaction and a relay reads. seq is the staging order
// (AUTO_INCREMENT, never reused); id is outbox.ID, unique, so that staging
// an intent's message again is a no-op. Times are microseconds since the
// epoch; a message is pending while sent_at and parked_at are NULL. MySQL
// has no partial index: pend_idx serves the claim (NULL, NULL, seq…) and
// the sweep (sent_at < …).
func outboxMigration(n names) []string {
	return []string{`CREATE TABLE IF NOT EXISTS ` + n.outbox + ` (
	seq           BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
	id            VARBINARY(255) NOT NULL,
	scope         VARBINARY(255) NOT NULL,
	` + "`key`" + `         VARBINARY(255) NOT NULL,
	name          VARBINARY(255) NOT NULL,
	subject       BLOB           NOT NULL,
	body          LONGBLOB       NOT NULL,
	headers       BLOB           NULL,
	partition_key BLOB           NOT NULL,
	staged_at     BIGINT         NOT NULL,
	attempts      INT            NOT NULL DEFAULT 0,
	last_error    BLOB           NOT NULL,
	sent_at       BIGINT         NULL,
	parked_at     BIGINT         NULL,
	UNIQUE KEY id_idx (id),
	KEY pend_idx (sent_at, parked_at, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`}
}

// The transactions of atomic work and of local steps stage messages
// (outbox.Stage).
var (
	_ outbox.Stager = (*Tx)(nil)
	_ outbox.Stager = (*stepTx)(nil)
)

// OutboxIntent implements outbox.Stager: the key the transaction records.
func (t *Tx) OutboxIntent() (scope, key string) { return t.scope, t.key }

// StageOutbox implements outbox.Stager: it inserts msgs in the
// transaction, in one statement. Relays find them by polling.
func (t *Tx) StageOutbox(ctx context.Context, msgs []outbox.Staged) error {
	if t.ended {
		return sql.ErrTxDone
	}
	return t.store.stageOutbox(ctx, t.tx, msgs)
}

// OutboxIntent implements outbox.Stager: the leased record's key.
func (st *stepTx) OutboxIntent() (scope, key string) { return st.lease.Scope, st.lease.Key }

// StageOutbox implements outbox.Stager, as Tx's does.
func (st *stepTx) StageOutbox(ctx context.Context, msgs []outbox.Staged) error {
	if st.ended {
		return sql.ErrTxDone
	}
	return st.store.stageOutbox(ctx, st.tx, msgs)
}

func (s *Store) stageOutbox(ctx context.Context, tx *sql.Tx, msgs []outbox.Staged) error {
	if len(msgs) == 0 {
		return nil
	}
	now := intLit(micros(time.Now()))
	var b strings.Builder
	b.WriteString("INSERT INTO " + s.names.outbox + " (id, scope, `key`, name, subject, body, headers, partition_key, staged_at, last_error) VALUES ")
	for i, m := range msgs {
		hdr, err := outboxHeadersLit(m.Headers)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(" + hexLit(m.ID) + ", " + hexLit(m.Scope) + ", " + hexLit(m.Key) + ", " + hexLit(m.Name) + ", " +
			hexLit(m.Subject) + ", " + hexLit(m.Body) + ", " + hdr + ", " + hexLit(m.PartitionKey) + ", " + now + ", '')")
	}
	// A message already staged keeps its row: the first one stands.
	b.WriteString(" ON DUPLICATE KEY UPDATE seq = seq")
	if _, err := tx.ExecContext(ctx, b.String()); err != nil {
		return unavailable("stage outbox", err)
	}
	return nil
}

func outboxHeadersLit(h map[string]string) (string, error) {
	if len(h) == 0 {
		return "NULL", nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("mysqlstore: outbox headers: %w", err)
	}
	return hexLit(b), nil
}

func decodeOutboxHeaders(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, err
	}
	return h, nil
}

// Outbox returns the store's outbox as an outbox.Source, for an
// outbox.Relay: the messages that outbox.Stage wrote in this store's
// transactions. Several relays, in one process or many, may read it at
// once: a claim locks its rows (SELECT … FOR UPDATE SKIP LOCKED, MySQL
// 8.0 and MariaDB 10.6 on) in a transaction that stays open until the
// claim ends, and leaves out every message of a partition key whose
// earlier pending message another claim holds, so that the messages of
// one partition key are published in order. MySQL has no LISTEN/NOTIFY:
// the relay polls (outbox.RelayConfig.PollInterval).
func (s *Store) Outbox() *Outbox { return &Outbox{store: s} }

// Outbox is a Store's outbox; see Store.Outbox.
type Outbox struct {
	store *Store
}

var _ outbox.Source = (*Outbox)(nil)

// Claim implements outbox.Source.
func (o *Outbox) Claim(ctx context.Context, n int) (outbox.Claim, error) {
	s := o.store
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, unavailable("outbox claim", err)
	}
	fail := func(err error) (outbox.Claim, error) {
		_ = tx.Rollback()
		return nil, unavailable("outbox claim", ctxCause(ctx, err))
	}
	rows, err := tx.QueryContext(ctx, "SELECT seq, id, subject, body, headers, partition_key, attempts FROM "+s.names.outbox+
		" WHERE sent_at IS NULL AND parked_at IS NULL ORDER BY seq LIMIT "+intLit(int64(max(n, 0)))+" FOR UPDATE SKIP LOCKED")
	if err != nil {
		return fail(err)
	}
	var (
		msgs []outbox.Envelope
		seqs []int64
		last = map[string]int64{} // partition key → the last seq claimed of it
	)
	for rows.Next() {
		var (
			seq          int64
			id, subj, pk []byte
			hdr          []byte
			e            outbox.Envelope
		)
		if err := rows.Scan(&seq, &id, &subj, &e.Body, &hdr, &pk, &e.Attempt); err != nil {
			rows.Close()
			return fail(err)
		}
		e.ID, e.Subject, e.PartitionKey = string(id), string(subj), string(pk)
		e.Attempt++
		if e.Body == nil {
			e.Body = []byte{}
		}
		if e.Headers, err = decodeOutboxHeaders(hdr); err != nil {
			rows.Close()
			_ = tx.Rollback()
			return nil, fmt.Errorf("mysqlstore: outbox message %s: headers: %w", e.ID, err)
		}
		if e.PartitionKey != "" {
			last[e.PartitionKey] = seq
		}
		msgs = append(msgs, e)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	// A pending message of a partition key that this claim did not lock,
	// before one it did, is another claim's (SKIP LOCKED passed it over):
	// the key's messages from there on wait for that claim to end.
	cut, err := o.cutoffs(ctx, tx, last, seqs)
	if err != nil {
		return fail(err)
	}
	c := &claim{o: o, tx: tx, seq: map[string]int64{}, attempt: map[string]int{}}
	for i, e := range msgs {
		if at, ok := cut[e.PartitionKey]; ok && seqs[i] > at {
			continue
		}
		c.msgs = append(c.msgs, e)
		c.seq[e.ID] = seqs[i]
		c.attempt[e.ID] = e.Attempt
	}
	return c, nil
}

// cutoffs returns, for each partition key of last (the key and the last
// seq the claim locked of it), the first pending message of the key
// before that seq which the claim did not lock (held, the seqs it
// locked), if there is one. The claim publishes none of the key's
// messages after it: they would overtake it. With no per-key lock in the
// claim's scan, two claims can hold interleaved messages of one key;
// only the one that holds the key's first pending message publishes,
// and only up to the other's first.
func (o *Outbox) cutoffs(ctx context.Context, tx *sql.Tx, last map[string]int64, held []int64) (map[string]int64, error) {
	if len(last) == 0 {
		return nil, nil
	}
	conds := make([]string, 0, len(last))
	for pk, seq := range last {
		conds = append(conds, "(partition_key = "+hexLit(pk)+" AND seq < "+intLit(seq)+")")
	}
	in := make([]string, len(held))
	for i, seq := range held {
		in[i] = intLit(seq)
	}
	rows, err := tx.QueryContext(ctx, "SELECT partition_key, MIN(seq) FROM "+o.store.names.outbox+
		" WHERE sent_at IS NULL AND parked_at IS NULL AND ("+strings.Join(conds, " OR ")+")"+
		" AND seq NOT IN ("+strings.Join(in, ", ")+") GROUP BY partition_key")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cut := map[string]int64{}
	for rows.Next() {
		var pk []byte
		var seq int64
		if err := rows.Scan(&pk, &seq); err != nil {
			return nil, err
		}
		cut[string(pk)] = seq
	}
	return cut, rows.Err()
}

type claim struct {
	o       *Outbox
	tx      *sql.Tx
	msgs    []outbox.Envelope
	seq     map[string]int64
	attempt map[string]int
}

func (c *claim) Messages() []outbox.Envelope { return c.msgs }

func (c *claim) Finish(ctx context.Context, out *outbox.Outcome) ([]string, error) {
	table := c.o.store.names.outbox
	now := intLit(micros(out.Now))
	fail := func(err error) ([]string, error) {
		_ = c.tx.Rollback()
		return nil, unavailable("outbox mark", ctxCause(ctx, err))
	}
	if len(out.Sent) > 0 {
		seqs := make([]string, 0, len(out.Sent))
		for _, id := range out.Sent {
			if seq, ok := c.seq[id]; ok {
				seqs = append(seqs, intLit(seq))
			}
		}
		if len(seqs) > 0 {
			if _, err := c.tx.ExecContext(ctx, "UPDATE "+table+" SET sent_at = "+now+
				" WHERE sent_at IS NULL AND seq IN ("+strings.Join(seqs, ", ")+")"); err != nil {
				return fail(err)
			}
		}
	}
	var parked []string
	for _, f := range out.Failed {
		seq, ok := c.seq[f.ID]
		if !ok {
			continue
		}
		// The claim holds the row: its attempts are those it read. MySQL
		// assigns left to right, so parked_at is set before attempts.
		park := c.attempt[f.ID] >= out.MaxAttempts
		parkedAt := "NULL"
		if park {
			parkedAt = now
		}
		if _, err := c.tx.ExecContext(ctx, "UPDATE "+table+" SET parked_at = "+parkedAt+", attempts = attempts + 1, last_error = "+
			hexLit(f.Error)+" WHERE seq = "+intLit(seq)); err != nil {
			return fail(err)
		}
		if park {
			parked = append(parked, f.ID)
		}
	}
	if err := c.tx.Commit(); err != nil {
		return nil, unavailable("outbox mark", err)
	}
	return parked, nil
}

func (c *claim) Abort(context.Context) error {
	if err := c.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return unavailable("outbox abort", err)
	}
	return nil
}

// Backlog implements outbox.Source.
func (o *Outbox) Backlog(ctx context.Context) (outbox.Backlog, error) {
	var (
		b      outbox.Backlog
		oldest sql.NullInt64
	)
	err := o.store.db.QueryRowContext(ctx, "SELECT COALESCE(SUM(parked_at IS NULL), 0), MIN(CASE WHEN parked_at IS NULL THEN staged_at END), "+
		"COALESCE(SUM(parked_at IS NOT NULL), 0) FROM "+o.store.names.outbox+" WHERE sent_at IS NULL").Scan(&b.Pending, &oldest, &b.Parked)
	if err != nil {
		return b, unavailable("outbox backlog", err)
	}
	if oldest.Valid {
		b.OldestPending = fromMicros(oldest.Int64)
	}
	return b, nil
}

// Sweep implements outbox.Source.
func (o *Outbox) Sweep(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := o.store.db.ExecContext(ctx, "DELETE FROM "+o.store.names.outbox+" WHERE sent_at < "+intLit(micros(before))+
		" ORDER BY sent_at LIMIT "+intLit(int64(max(limit, 0))))
	if err != nil {
		return 0, unavailable("outbox sweep", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Parked implements outbox.Source.
func (o *Outbox) Parked(ctx context.Context, limit int) ([]outbox.ParkedMessage, error) {
	rows, err := o.store.db.QueryContext(ctx, "SELECT id, subject, body, headers, partition_key, attempts, staged_at, parked_at, last_error FROM "+
		o.store.names.outbox+" WHERE sent_at IS NULL AND parked_at IS NOT NULL ORDER BY seq LIMIT "+intLit(int64(max(limit, 0))))
	if err != nil {
		return nil, unavailable("outbox parked", err)
	}
	defer rows.Close()
	var out []outbox.ParkedMessage
	for rows.Next() {
		var (
			p                       outbox.ParkedMessage
			id, subj, pk, hdr, last []byte
			stagedAt, parkedAt      int64
		)
		if err := rows.Scan(&id, &subj, &p.Body, &hdr, &pk, &p.Attempt, &stagedAt, &parkedAt, &last); err != nil {
			return nil, unavailable("outbox parked", err)
		}
		p.ID, p.Subject, p.PartitionKey, p.LastError = string(id), string(subj), string(pk), string(last)
		if p.Body == nil {
			p.Body = []byte{}
		}
		if p.Headers, err = decodeOutboxHeaders(hdr); err != nil {
			return nil, fmt.Errorf("mysqlstore: outbox message %s: headers: %w", p.ID, err)
		}
		p.StagedAt, p.ParkedAt = fromMicros(stagedAt), fromMicros(parkedAt)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("outbox parked", err)
	}
	return out, nil
}

// Unpark implements outbox.Source.
func (o *Outbox) Unpark(ctx context.Context, id string) (bool, error) {
	res, err := o.store.db.ExecContext(ctx, "UPDATE "+o.store.names.outbox+" SET parked_at = NULL, attempts = 0, last_error = ''"+
		" WHERE id = "+hexLit(id)+" AND sent_at IS NULL AND parked_at IS NOT NULL")
	if err != nil {
		return false, unavailable("outbox unpark", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

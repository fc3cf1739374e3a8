package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
)

var _ outbox.Stager = (*Tx)(nil)

// OutboxIntent implements outbox.Stager: the key the transaction records.
func (t *Tx) OutboxIntent() (scope, key string) { return t.scope, t.key }

// StageOutbox implements outbox.Stager: it inserts msgs and the NOTIFY
// that wakes pgstore's relays at commit, a round trip each.
func (t *Tx) StageOutbox(ctx context.Context, msgs []outbox.Staged) error {
	if t.ended {
		return sql.ErrTxDone
	}
	st := t.store.outboxSQL()
	for _, m := range msgs {
		hdr, err := pgschema.EncodeHeaders(m.Headers)
		if err != nil {
			return err
		}
		body := m.Body
		if body == nil {
			body = []byte{}
		}
		if _, err := t.tx.ExecContext(ctx, st.Insert, m.ID, m.Scope, m.Key, m.Name, m.Subject, body, hdr, m.PartitionKey); err != nil {
			return err
		}
	}
	_, err := t.tx.ExecContext(ctx, st.Notify, t.store.names.OutboxChannel)
	return err
}

var outboxStatements sync.Map // *Store → *pgschema.OutboxStatements

func (s *Store) outboxSQL() *pgschema.OutboxStatements {
	if v, ok := outboxStatements.Load(s); ok {
		return v.(*pgschema.OutboxStatements)
	}
	st := pgschema.NewOutboxStatements(s.names)
	v, _ := outboxStatements.LoadOrStore(s, &st)
	return v.(*pgschema.OutboxStatements)
}

// Outbox returns the store's outbox as an outbox.Source, for an
// outbox.Relay: the same table, claims and locks as pgstore's
// Store.Outbox, so relays of both stores may run at once. database/sql
// cannot LISTEN, so this one polls (RelayConfig.PollInterval); a relay
// through pgstore on the same table is woken by the NOTIFY that staging
// sends.
func (s *Store) Outbox() *Outbox { return &Outbox{store: s, sql: s.outboxSQL()} }

// Outbox is a Store's outbox; see Store.Outbox.
type Outbox struct {
	store *Store
	sql   *pgschema.OutboxStatements
}

var _ outbox.Source = (*Outbox)(nil)

// Claim implements outbox.Source.
func (o *Outbox) Claim(ctx context.Context, n int) (outbox.Claim, error) {
	tx, err := o.store.db.BeginTx(context.WithoutCancel(ctx), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, unavailable("outbox claim", err)
	}
	fail := func(err error) (outbox.Claim, error) {
		_ = tx.Rollback()
		return nil, unavailable("outbox claim", err)
	}
	if _, err := tx.ExecContext(ctx, o.sql.ClaimSettings); err != nil {
		return fail(err)
	}
	rows, err := tx.QueryContext(ctx, o.sql.Claim, o.store.names.OutboxLockNS, n)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	c := &claim{o: o, tx: tx, seq: map[string]int64{}}
	for rows.Next() {
		var (
			seq int64
			e   outbox.Envelope
			hdr *string
		)
		if err := rows.Scan(&seq, &e.ID, &e.Subject, &e.Body, &hdr, &e.PartitionKey, &e.Attempt); err != nil {
			return fail(err)
		}
		e.Attempt++
		if e.Headers, err = pgschema.DecodeHeaders(hdr); err != nil {
			return fail(fmt.Errorf("message %s: headers: %w", e.ID, err))
		}
		c.msgs = append(c.msgs, e)
		c.seq[e.ID] = seq
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	rows.Close()
	if err := c.leaveOutBlocked(ctx); err != nil {
		return fail(err)
	}
	return c, nil
}

// leaveOutBlocked drops from the claim the messages of every partition
// key with a pending message staged before the first the claim holds, as
// pgstore's claim does (pgschema.OutboxStatements.Blocked).
func (c *claim) leaveOutBlocked(ctx context.Context) error {
	first := pgschema.FirstSeqs(c.msgs, c.seq)
	if first == "" {
		return nil
	}
	rows, err := c.tx.QueryContext(ctx, c.o.sql.Blocked, first)
	if err != nil {
		return err
	}
	defer rows.Close()
	var blocked []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return err
		}
		blocked = append(blocked, k)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	c.msgs = pgschema.LeaveOut(c.msgs, c.seq, blocked)
	return nil
}

type claim struct {
	o    *Outbox
	tx   *sql.Tx
	msgs []outbox.Envelope
	seq  map[string]int64
}

func (c *claim) Messages() []outbox.Envelope { return c.msgs }

func (c *claim) Finish(ctx context.Context, out *outbox.Outcome) ([]string, error) {
	if len(out.Sent) > 0 {
		seqs := make([]int64, 0, len(out.Sent))
		for _, id := range out.Sent {
			seqs = append(seqs, c.seq[id])
		}
		if _, err := c.tx.ExecContext(ctx, c.o.sql.MarkSent, pgschema.SeqArray(seqs), out.Now); err != nil {
			_ = c.tx.Rollback()
			return nil, unavailable("outbox mark", err)
		}
	}
	var parked []string
	for _, f := range out.Failed {
		var p bool
		if err := c.tx.QueryRowContext(ctx, c.o.sql.Fail, c.seq[f.ID], f.Error, out.MaxAttempts, out.Now).Scan(&p); err != nil {
			_ = c.tx.Rollback()
			return nil, unavailable("outbox mark", err)
		}
		if p {
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
		return err
	}
	return nil
}

// Backlog implements outbox.Source.
func (o *Outbox) Backlog(ctx context.Context) (outbox.Backlog, error) {
	var (
		b      outbox.Backlog
		oldest sql.NullTime
	)
	if err := o.store.db.QueryRowContext(ctx, o.sql.Backlog).Scan(&b.Pending, &oldest, &b.Parked); err != nil {
		return b, unavailable("outbox backlog", err)
	}
	if oldest.Valid {
		b.OldestPending = oldest.Time
	}
	return b, nil
}

// Sweep implements outbox.Source.
func (o *Outbox) Sweep(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := o.store.db.ExecContext(ctx, o.sql.Sweep, before, limit)
	if err != nil {
		return 0, unavailable("outbox sweep", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Parked implements outbox.Source.
func (o *Outbox) Parked(ctx context.Context, limit int) ([]outbox.ParkedMessage, error) {
	rows, err := o.store.db.QueryContext(ctx, o.sql.Parked, limit)
	if err != nil {
		return nil, unavailable("outbox parked", err)
	}
	defer rows.Close()
	var out []outbox.ParkedMessage
	for rows.Next() {
		var (
			p   outbox.ParkedMessage
			hdr *string
		)
		if err := rows.Scan(&p.ID, &p.Subject, &p.Body, &hdr, &p.PartitionKey, &p.Attempt, &p.StagedAt, &p.ParkedAt, &p.LastError); err != nil {
			return nil, unavailable("outbox parked", err)
		}
		if p.Headers, err = pgschema.DecodeHeaders(hdr); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Unpark implements outbox.Source.
func (o *Outbox) Unpark(ctx context.Context, id string) (bool, error) {
	res, err := o.store.db.ExecContext(ctx, o.sql.Unpark, id)
	if err != nil {
		return false, unavailable("outbox unpark", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

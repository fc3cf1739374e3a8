package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The transactions of atomic work and of local steps stage messages
// (outbox.Stage).
var (
	_ outbox.Stager = (*Tx)(nil)
	_ outbox.Stager = (*stepTx)(nil)
)

// OutboxIntent implements outbox.Stager: the key the transaction records.
func (t *Tx) OutboxIntent() (scope, key string) { return t.scope, t.key }

// StageOutbox implements outbox.Stager. The messages are written by
// Commit, in its one round trip, after the record (so staging costs no
// round trip of its own); after the commit, the store's notifier wakes the
// relays (outboxNotifier), outside the transaction. A message that cannot
// be written fails Commit, and nothing commits.
func (t *Tx) StageOutbox(ctx context.Context, msgs []outbox.Staged) error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	for _, m := range msgs {
		a, err := outboxArgs(m)
		if err != nil {
			return err
		}
		t.staged = append(t.staged, a)
	}
	return nil
}

// OutboxIntent implements outbox.Stager: the leased record's key.
func (t *stepTx) OutboxIntent() (scope, key string) { return t.lease.Scope, t.lease.Key }

// StageOutbox implements outbox.Stager: it inserts msgs and queues the
// NOTIFY that wakes the relays at the step's commit, in one round trip.
func (t *stepTx) StageOutbox(ctx context.Context, msgs []outbox.Staged) error {
	if *t.handle.ended {
		return pgx.ErrTxClosed
	}
	st := t.store.outboxSQL()
	b := &pgx.Batch{}
	for _, m := range msgs {
		a, err := outboxArgs(m)
		if err != nil {
			return err
		}
		b.Queue(st.Insert, a...)
	}
	b.Queue(st.Notify, t.store.names.OutboxChannel)
	return t.handle.SendBatch(ctx, b).Close()
}

// outboxArgs are the arguments of the outbox INSERT for m.
func outboxArgs(m outbox.Staged) ([]any, error) {
	hdr, err := pgschema.EncodeHeaders(m.Headers)
	if err != nil {
		return nil, err
	}
	body := m.Body
	if body == nil {
		body = []byte{}
	}
	return []any{m.ID, m.Scope, m.Key, m.Name, m.Subject, body, hdr, m.PartitionKey}, nil
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
// outbox.Relay: the messages that outbox.Stage wrote in this store's
// transactions (and in pgstore/sqldb's over the same table). Several
// relays, in one process or many, may read it at once: a claim locks its
// rows (FOR UPDATE SKIP LOCKED) and the partition keys of its messages
// (advisory locks), so that no message is published by two relays at
// once and the messages of one partition key are published in order. It
// implements outbox.Waiter with LISTEN on a connection of its own, opened
// with the pool's configuration; Close closes it.
func (s *Store) Outbox() *Outbox {
	return &Outbox{store: s, sql: s.outboxSQL()}
}

// Outbox is a Store's outbox; see Store.Outbox.
type Outbox struct {
	store *Store
	sql   *pgschema.OutboxStatements

	mu     sync.Mutex
	listen *pgx.Conn
}

var (
	_ outbox.Source = (*Outbox)(nil)
	_ outbox.Waiter = (*Outbox)(nil)
)

// Claim implements outbox.Source. BEGIN, the claim's settings and the claim
// are one pipelined round trip; Finish sends the marks and COMMIT in one
// more. A relay's claim thus costs PostgreSQL two round trips however many
// messages it holds (docs/BENCHMARKS.md, "Transfer events").
func (o *Outbox) Claim(ctx context.Context, n int) (outbox.Claim, error) {
	conn, err := o.store.pool.Acquire(ctx)
	if err != nil {
		return nil, unavailable("outbox claim", err)
	}
	c := &claim{o: o, conn: conn, seq: map[string]int64{}}
	var decodeErr error
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	b.Queue(o.sql.ClaimSettings)
	b.Queue(o.sql.Claim, o.store.names.OutboxLockNS, n).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				seq int64
				e   outbox.Envelope
				hdr *string
			)
			if err := rows.Scan(&seq, &e.ID, &e.Subject, &e.Body, &hdr, &e.PartitionKey, &e.Attempt); err != nil {
				return err
			}
			e.Attempt++
			h, err := pgschema.DecodeHeaders(hdr)
			if err != nil {
				decodeErr = fmt.Errorf("pgstore: outbox message %s: headers: %w", e.ID, err)
				return decodeErr
			}
			e.Headers = h
			c.msgs = append(c.msgs, e)
			c.seq[e.ID] = seq
		}
		return rows.Err()
	})
	if err := conn.Conn().SendBatch(ctx, b).Close(); err != nil {
		c.end(ctx)
		if decodeErr != nil {
			return nil, decodeErr
		}
		return nil, unavailable("outbox claim", err)
	}
	if err := c.leaveOutBlocked(ctx); err != nil {
		c.end(ctx)
		return nil, unavailable("outbox claim", err)
	}
	return c, nil
}

// leaveOutBlocked drops from the claim the messages of every partition
// key with a pending message staged before the first the claim holds
// (pgschema.OutboxStatements.Blocked): the scan passed over it while
// another claim held the key.
func (c *claim) leaveOutBlocked(ctx context.Context) error {
	first := pgschema.FirstSeqs(c.msgs, c.seq)
	if first == "" {
		return nil
	}
	rows, err := c.conn.Query(ctx, c.o.sql.Blocked, first)
	if err != nil {
		return err
	}
	blocked, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	c.msgs = pgschema.LeaveOut(c.msgs, c.seq, blocked)
	return nil
}

// claim holds its rows locked in the transaction open on conn until Finish
// or Abort.
type claim struct {
	o     *Outbox
	conn  *pgxpool.Conn
	ended bool
	msgs  []outbox.Envelope
	seq   map[string]int64
}

func (c *claim) Messages() []outbox.Envelope { return c.msgs }

// end rolls back what is left of the claim's transaction and releases its
// connection, once.
func (c *claim) end(ctx context.Context) {
	if !c.ended {
		c.ended = true
		endConn(ctx, c.conn)
	}
}

// Finish pipelines the marks and COMMIT. A mark that fails stops the
// pipeline before COMMIT, and the claim is rolled back whole.
func (c *claim) Finish(ctx context.Context, out *outbox.Outcome) ([]string, error) {
	if c.ended {
		return nil, pgx.ErrTxClosed
	}
	b := &pgx.Batch{}
	if len(out.Sent) > 0 {
		seqs := make([]int64, 0, len(out.Sent))
		for _, id := range out.Sent {
			seqs = append(seqs, c.seq[id])
		}
		b.Queue(c.o.sql.MarkSent, pgschema.SeqArray(seqs), out.Now)
	}
	var parked []string
	for _, f := range out.Failed {
		b.Queue(c.o.sql.Fail, c.seq[f.ID], f.Error, out.MaxAttempts, out.Now).QueryRow(func(r pgx.Row) error {
			var p bool
			if err := r.Scan(&p); err != nil {
				return err
			}
			if p {
				parked = append(parked, f.ID)
			}
			return nil
		})
	}
	var commitTag pgconn.CommandTag
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		commitTag = ct
		return nil
	})
	err := c.conn.Conn().SendBatch(ctx, b).Close()
	c.end(ctx) // rolls back if the pipeline stopped short of COMMIT
	switch {
	case err != nil:
		return nil, unavailable("outbox mark", err)
	case commitTag.String() != "COMMIT":
		return nil, unavailable("outbox mark", fmt.Errorf("the claim was rolled back (%s): %w", commitTag, pgx.ErrTxCommitRollback))
	}
	return parked, nil
}

func (c *claim) Abort(ctx context.Context) error {
	c.end(ctx)
	return nil
}

// Backlog implements outbox.Source.
func (o *Outbox) Backlog(ctx context.Context) (outbox.Backlog, error) {
	var (
		b      outbox.Backlog
		oldest *time.Time
	)
	if err := o.store.pool.QueryRow(ctx, o.sql.Backlog).Scan(&b.Pending, &oldest, &b.Parked); err != nil {
		return b, unavailable("outbox backlog", err)
	}
	if oldest != nil {
		b.OldestPending = *oldest
	}
	return b, nil
}

// Sweep implements outbox.Source.
func (o *Outbox) Sweep(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := o.store.pool.Exec(ctx, o.sql.Sweep, before, limit)
	if err != nil {
		return 0, unavailable("outbox sweep", err)
	}
	return int(tag.RowsAffected()), nil
}

// Parked implements outbox.Source.
func (o *Outbox) Parked(ctx context.Context, limit int) ([]outbox.ParkedMessage, error) {
	rows, err := o.store.pool.Query(ctx, o.sql.Parked, limit)
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
	if err := rows.Err(); err != nil {
		return nil, unavailable("outbox parked", err)
	}
	return out, nil
}

// Unpark implements outbox.Source.
func (o *Outbox) Unpark(ctx context.Context, id string) (bool, error) {
	tag, err := o.store.pool.Exec(ctx, o.sql.Unpark, id)
	if err != nil {
		return false, unavailable("outbox unpark", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Wait implements outbox.Waiter with LISTEN on the outbox's channel. The
// first call after the listening connection was (re)opened returns at
// once, since a notification may have been missed while it was not.
func (o *Outbox) Wait(ctx context.Context, d time.Duration) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.listen == nil || o.listen.IsClosed() {
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		conn, err := pgx.ConnectConfig(cctx, o.store.pool.Config().ConnConfig.Copy())
		if err != nil {
			return unavailable("outbox listen", err)
		}
		if _, err := conn.Exec(cctx, o.sql.Listen); err != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
			return unavailable("outbox listen", err)
		}
		o.listen = conn
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := o.listen.WaitForNotification(wctx)
	if err == nil || wctx.Err() != nil {
		// Drain what else is buffered: one claim covers them all.
		return nil
	}
	_ = o.listen.Close(context.WithoutCancel(ctx))
	o.listen = nil
	return unavailable("outbox listen", err)
}

// Close closes the listening connection, if any.
func (o *Outbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.listen == nil {
		return nil
	}
	err := o.listen.Close(context.Background())
	o.listen = nil
	return err
}

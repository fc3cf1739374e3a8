package pgschema

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idem/outbox"
)

// outboxSQL is migration 6: the outbox that outbox.Stage writes in the
// work's transaction and a relay reads. seq is the staging order; id is
// outbox.ID, unique, so that staging an intent's message again is a
// no-op. A message is pending while sent_at and parked_at are NULL. The
// partial indexes keep the relay's claim and the sweep on the rows they
// read.
func outboxSQL(n Names) string {
	return `CREATE TABLE ` + n.Outbox + ` (
	seq           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id            text        NOT NULL,
	scope         text        NOT NULL,
	key           text        NOT NULL,
	name          text        NOT NULL,
	subject       text        NOT NULL,
	body          bytea       NOT NULL,
	headers       jsonb,
	partition_key text        NOT NULL DEFAULT '',
	staged_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
	attempts      integer     NOT NULL DEFAULT 0,
	last_error    text        NOT NULL DEFAULT '',
	sent_at       timestamptz,
	parked_at     timestamptz,
	CONSTRAINT ` + n.OutboxID + ` UNIQUE (id)
);
CREATE INDEX ` + n.OutboxPending + ` ON ` + n.Outbox + ` (seq) WHERE sent_at IS NULL;
CREATE INDEX ` + n.OutboxSent + ` ON ` + n.Outbox + ` (sent_at) WHERE sent_at IS NOT NULL`
}

// OutboxStatements is the SQL of the outbox, built once per store.
type OutboxStatements struct {
	// Insert stages one message: $1 id, $2 scope, $3 key, $4 name, $5
	// subject, $6 body, $7 headers (JSON text or NULL), $8 partition key.
	Insert string
	// Notify wakes the relays listening on the channel once the
	// transaction commits: $1 is the channel.
	Notify string
	// Listen subscribes a connection to the channel.
	Listen string
	// ClaimSettings is the claim transaction's first statement. Its
	// commit (the marks) does not wait for the WAL flush: a mark lost to a
	// server crash only makes the relay publish the message again, with
	// the same id, which at-least-once allows; the staging transactions
	// are not affected. And its Claim and Blocked scan the pending index
	// in seq order, never as a bitmap: a sent message leaves a dead entry
	// in that index until VACUUM, which an index scan marks dead the first
	// time it passes it and skips from then on, while a bitmap scan visits
	// its heap row on every claim, so that the cost of an empty claim grew
	// with the messages sent since the table's last VACUUM.
	ClaimSettings string
	// Claim locks up to $2 pending messages in staging order, skipping
	// those another claim holds and every message of a partition key
	// another claim holds ($1 is Names.OutboxLockNS): the partition's
	// transaction-scoped advisory lock. It returns seq, id, subject, body,
	// headers, partition_key, attempts.
	Claim string
	// Blocked returns, of the partition keys of a claim ($1: a JSON object
	// of each key and the first seq the claim holds of it, see
	// FirstSeqs), those with a pending message staged before that first
	// one. A claim whose scan passed over a key's message while another
	// claim held the key, and took a later one of the key once that claim
	// had ended, leaves the key's messages out: published, they would
	// overtake the one passed over.
	Blocked string
	// MarkSent marks sent at $2 the messages whose seq is in $1, a text
	// array ("{1,2}").
	MarkSent string
	// Fail counts a refusal of message $1 with error $2 and parks it at
	// $4 when that makes $3 refusals. It returns whether it parked it.
	Fail string
	// Backlog returns the pending count, the oldest pending staged_at and
	// the parked count.
	Backlog string
	// Sweep deletes at most $2 messages sent before $1.
	Sweep string
	// Parked lists at most $1 parked messages: id, subject, body,
	// headers, partition_key, attempts, staged_at, parked_at, last_error.
	Parked string
	// Unpark makes parked message $1 pending again.
	Unpark string
}

// NewOutboxStatements builds the outbox's SQL over n.
func NewOutboxStatements(n Names) OutboxStatements {
	o := n.Outbox
	return OutboxStatements{
		Insert: `INSERT INTO ` + o + ` (id, scope, key, name, subject, body, headers, partition_key)
VALUES ($1, $2, $3, $4, $5, $6, $7::text::jsonb, $8) ON CONFLICT (id) DO NOTHING`,
		Notify:        `SELECT pg_notify($1, '')`,
		ClaimSettings: `SELECT set_config('synchronous_commit', 'off', true), set_config('enable_bitmapscan', 'off', true)`,
		Listen:        `LISTEN ` + Quote(n.OutboxChannel),
		Blocked: `SELECT DISTINCT o.partition_key FROM ` + o + ` AS o
JOIN jsonb_each_text($1::text::jsonb) AS f(pk, first) ON o.partition_key = f.pk AND o.seq < f.first::bigint
WHERE o.sent_at IS NULL AND o.parked_at IS NULL`,
		Claim: `SELECT seq, id, subject, body, headers::text, partition_key, attempts FROM ` + o + `
WHERE sent_at IS NULL AND parked_at IS NULL
  AND (partition_key = '' OR pg_try_advisory_xact_lock($1::int4, hashtext(partition_key)))
ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED`,
		MarkSent: `UPDATE ` + o + ` SET sent_at = $2 WHERE seq = ANY($1::text::bigint[]) AND sent_at IS NULL`,
		Fail: `UPDATE ` + o + ` SET attempts = attempts + 1, last_error = $2,
	parked_at = CASE WHEN attempts + 1 >= $3 THEN $4::timestamptz END
WHERE seq = $1 RETURNING parked_at IS NOT NULL`,
		Backlog: `SELECT count(*) FILTER (WHERE parked_at IS NULL), min(staged_at) FILTER (WHERE parked_at IS NULL),
	count(*) FILTER (WHERE parked_at IS NOT NULL) FROM ` + o + ` WHERE sent_at IS NULL`,
		Sweep: `DELETE FROM ` + o + ` WHERE seq IN (SELECT seq FROM ` + o + ` WHERE sent_at < $1 ORDER BY sent_at LIMIT $2)`,
		Parked: `SELECT id, subject, body, headers::text, partition_key, attempts, staged_at, parked_at, last_error FROM ` + o + `
WHERE sent_at IS NULL AND parked_at IS NOT NULL ORDER BY seq LIMIT $1`,
		Unpark: `UPDATE ` + o + ` SET parked_at = NULL, attempts = 0, last_error = ''
WHERE id = $1 AND sent_at IS NULL AND parked_at IS NOT NULL`,
	}
}

// outboxChannel is the NOTIFY channel of the outbox of table in schema:
// "schema.table_outbox", cut to PostgreSQL's 63-byte identifiers on a
// character boundary (a longer one is refused by pg_notify).
func outboxChannel(schema, table string) string {
	c := schema + "." + table + "_outbox"
	for len(c) > 63 {
		_, size := utf8.DecodeLastRuneInString(c)
		c = c[:len(c)-size]
	}
	return c
}

// outboxLockNS is the first key of the partitions' advisory locks of the
// outbox of table in schema (the second is hashtext of the partition key):
// the two-key locks never meet the one-key locks of the records.
func outboxLockNS(schema, table string) int32 {
	h := fnv.New32a()
	h.Write([]byte("idem outbox " + schema + "." + table))
	return int32(h.Sum32())
}

// EncodeHeaders returns headers as the JSON text of the headers column,
// or nil (SQL NULL) when there are none.
func EncodeHeaders(h map[string]string) (*string, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// DecodeHeaders reads the headers column.
func DecodeHeaders(s *string) (map[string]string, error) {
	if s == nil || *s == "" {
		return nil, nil
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(*s), &h); err != nil {
		return nil, err
	}
	return h, nil
}

// FirstSeqs returns the argument of OutboxStatements.Blocked for a
// claim's messages, in seq order, and their seqs (by message id): each
// partition key ("" is none) and the first seq claimed of it, as a JSON
// object; "" when the claim has no partition key.
func FirstSeqs(msgs []outbox.Envelope, seq map[string]int64) string {
	first := map[string]int64{}
	for _, m := range msgs {
		if _, ok := first[m.PartitionKey]; !ok && m.PartitionKey != "" {
			first[m.PartitionKey] = seq[m.ID]
		}
	}
	if len(first) == 0 {
		return ""
	}
	b, _ := json.Marshal(first) // a map of strings to integers always encodes
	return string(b)
}

// LeaveOut returns msgs without the messages of the blocked partition
// keys (what OutboxStatements.Blocked returned), and deletes them from
// seq. They stay locked by the claim, unpublished, and are claimed again,
// in order, once it ends.
func LeaveOut(msgs []outbox.Envelope, seq map[string]int64, blocked []string) []outbox.Envelope {
	if len(blocked) == 0 {
		return msgs
	}
	kept := msgs[:0]
	for _, m := range msgs {
		if slices.Contains(blocked, m.PartitionKey) {
			delete(seq, m.ID)
			continue
		}
		kept = append(kept, m)
	}
	return kept
}

// SeqArray returns seqs as the text of a bigint array, for MarkSent.
func SeqArray(seqs []int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range seqs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(s, 10))
	}
	b.WriteByte('}')
	return b.String()
}

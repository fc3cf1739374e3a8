package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

var (
	_ idem.Admin     = (*Store)(nil)
	_ idem.Inspector = (*Store)(nil)
)

// errClusterAdmin is the error of the operators' calls on a Redis Cluster:
// a record and the audit log are in different hash slots, which one
// script cannot write together (docs/REDIS.md, "Operators").
var errClusterAdmin = errors.New("redisstore: the operators' calls (idem.Admin) need one Redis server or Sentinel master, not a Redis Cluster")

// auditKeys returns the audit log's counter and entries (admin_scripts.go).
func (s *Store) auditKeys() []string {
	tag := "{" + s.cfg.Prefix + ":audit}"
	return []string{tag + ":id", tag + ":entries"}
}

// single returns the client of a store on one server (or a Sentinel
// master), or errClusterAdmin.
func (s *Store) single(op string) (*redis.Client, error) {
	c, ok := s.c.(*redis.Client)
	if !ok {
		return nil, fmt.Errorf("redisstore: %s: %w", op, errClusterAdmin)
	}
	return c, nil
}

// Lookup implements idem.Inspector.
func (s *Store) Lookup(ctx context.Context, p *idem.LookupParams) (*idem.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := s.c.HGetAll(ctx, recordKeys(s.member(p.Scope, p.Key))[0]).Result()
	if err != nil {
		return nil, s.wrap("lookup", err)
	}
	if len(f) == 0 {
		return nil, idem.ErrNotFound
	}
	st, err := recordFromFields(f)
	if err != nil {
		return nil, err
	}
	return st.rec, nil
}

// listScanCount is the COUNT of List's SCANs. It is fixed, so that a SCAN
// run again from a page's cursor reads the same keys while the keyspace
// does not change (see List).
const listScanCount = 500

// listMaxScans bounds the SCANs of one List call: a page over a keyspace
// with few matches may hold fewer than Limit records, and a Next.
const listMaxScans = 64

// List implements idem.Admin with SCAN over the record keys of the
// store's Prefix (and of one scope, with p.Scope). Its order is SCAN's,
// with each batch sorted by (Scope, Key): Redis keeps no index of every
// record, so the contract's order of (Scope, Key) holds within a page, not
// across pages. Every record present through a listing is listed; a
// record may be listed twice when Redis rehashes its keyspace meanwhile
// (as SCAN does), never dropped. A cursor is "<scan cursor>" or, for a
// page that ended inside a SCAN batch, "<scan cursor>.<next scan
// cursor>.<idem.ListCursor of the last record>".
func (s *Store) List(ctx context.Context, p *idem.ListParams) (*idem.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, fmt.Errorf("redisstore: List: limit must be positive, got %d", p.Limit)
	}
	c, err := s.single("list")
	if err != nil {
		return nil, err
	}
	cur, end, last, inBatch, err := parseScanCursor(p.Cursor)
	if err != nil {
		return nil, err
	}
	pattern := "{" + globEscaper.Replace(s.cfg.Prefix) + ":*}:rec"
	if p.Scope != "" {
		es := escaper.Replace(p.Scope)
		pattern = "{" + globEscaper.Replace(s.cfg.Prefix+":"+strconv.Itoa(len(es))+":"+es+":"+escaper.Replace(p.Prefix)) + "*}:rec"
	}
	page := &idem.ListPage{Records: []*idem.Record{}}
	for range listMaxScans {
		keys, next, err := c.Scan(ctx, cur, pattern, listScanCount).Result()
		if err != nil {
			return nil, s.wrap("list", err)
		}
		batch, err := s.readListed(ctx, c, keys, p)
		if err != nil {
			return nil, err
		}
		// Skip what the previous page took of this batch, only if SCAN
		// read the same keys again (it ended at the same cursor):
		// otherwise list the batch whole, twice rather than never.
		if inBatch && next == end {
			batch = slices.DeleteFunc(batch, func(r *idem.Record) bool { return compareRecords(r, last) <= 0 })
		}
		inBatch = false
		if room := p.Limit - len(page.Records); len(batch) > room {
			page.Records = append(page.Records, batch[:room]...)
			l := page.Records[len(page.Records)-1]
			page.Next = strconv.FormatUint(cur, 10) + "." + strconv.FormatUint(next, 10) + "." + idem.ListCursor(l.Scope, l.Key)
			return page, nil
		}
		page.Records = append(page.Records, batch...)
		if next == 0 {
			return page, nil
		}
		cur = next
		if len(page.Records) == p.Limit {
			break
		}
	}
	page.Next = strconv.FormatUint(cur, 10)
	return page, nil
}

// parseScanCursor reads a cursor of List ("" is the first page).
func parseScanCursor(c string) (cur, end uint64, last *idem.Record, inBatch bool, err error) {
	if c == "" {
		return 0, 0, nil, false, nil
	}
	bad := func(err error) (uint64, uint64, *idem.Record, bool, error) {
		return 0, 0, nil, false, fmt.Errorf("redisstore: List: bad cursor %q: %w", c, err)
	}
	parts := strings.SplitN(c, ".", 3)
	if cur, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return bad(err)
	}
	if len(parts) == 1 {
		return cur, 0, nil, false, nil
	}
	if len(parts) != 3 {
		return bad(errors.New("want 1 or 3 parts"))
	}
	if end, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return bad(err)
	}
	scope, key, err := idem.ParseListCursor(parts[2])
	if err != nil {
		return bad(err)
	}
	return cur, end, &idem.Record{Scope: scope, Key: key}, true, nil
}

func compareRecords(a, b *idem.Record) int {
	return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key))
}

// readListed reads the records of keys (one pipeline) and returns those
// of this store that match p, sorted by (Scope, Key), without Input.
func (s *Store) readListed(ctx context.Context, c *redis.Client, keys []string, p *idem.ListParams) ([]*idem.Record, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	if _, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = pl.HGetAll(ctx, k)
		}
		return nil
	}); err != nil {
		return nil, s.wrap("list: read records", err)
	}
	var out []*idem.Record
	for i, k := range keys {
		f := cmds[i].Val()
		if len(f) == 0 {
			continue // expired or forgotten since the SCAN
		}
		st, err := recordFromFields(f)
		if err != nil {
			return nil, err
		}
		r := st.rec
		// Another prefix may match the pattern ("idem:x" for "idem").
		if "{"+s.member(r.Scope, r.Key)+"}:rec" != k || !p.Matches(r) {
			continue
		}
		r.Input = nil
		out = append(out, r)
	}
	slices.SortFunc(out, compareRecords)
	return out, nil
}

// Steps implements idem.Admin.
func (s *Store) Steps(ctx context.Context, p *idem.LookupParams) ([]idem.Step, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply, err := s.run(ctx, "steps", stepsScript, recordKeys(s.member(p.Scope, p.Key)), false)
	if err != nil {
		return nil, err
	}
	flat, _ := reply.([]any)
	out := make([]idem.Step, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		name, _ := flat[i].(string)
		o, _ := flat[i+1].(string)
		out = append(out, idem.Step{Name: name, Output: []byte(o)})
	}
	return out, nil
}

// Forget implements idem.Admin, in one script run with its audit entry;
// the pending index is brought up to date after it.
func (s *Store) Forget(ctx context.Context, p *idem.ForgetParams) (*idem.Record, error) {
	force := "0"
	if p.Force {
		force = "1"
	}
	return s.change(ctx, "forget", p.Scope, p.Key, p.Token, p.Now, &p.Audit, 0, force)
}

// Resolve implements idem.Admin, as Forget does. The record's key expires
// as after Complete.
func (s *Store) Resolve(ctx context.Context, p *idem.ResolveParams) (*idem.Record, error) {
	ttl := max(p.ExpiresAt.Sub(p.Now), s.cfg.MinRetention, time.Millisecond)
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	body := p.Result.Body
	if body == nil {
		body = []byte{}
	}
	return s.change(ctx, "resolve", p.Scope, p.Key, p.Token, p.Now, &p.Audit, p.Result.Status, "0",
		strconv.Itoa(p.Result.Status), encodeHeader(p.Result.Header), body, micros(p.ExpiresAt), int64(ms))
}

// change runs changeScript (see its ARGV) and answers the record as it
// was, or the refusal as the error of idem.Admin.
func (s *Store) change(ctx context.Context, mode, scope, key string, token int64, now time.Time,
	e *idem.AuditEntry, status int, force string, extra ...any) (*idem.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, err := s.single(mode); err != nil {
		return nil, err
	}
	m := s.member(scope, key)
	keys := append(recordKeys(m), s.auditKeys()...)
	args := append([]any{mode, strconv.FormatInt(token, 10), micros(now), force,
		micros(e.At), e.Actor, e.Action, e.Reason, strconv.Itoa(status)}, extra...)
	reply, err := s.run(ctx, mode, changeScript, keys, true, args...)
	if err != nil {
		return nil, err
	}
	a, _ := reply.([]any)
	code := ""
	if len(a) > 0 {
		code, _ = a[0].(string)
	}
	what := fmt.Sprintf("redisstore: %s of key_sha256 %s", mode, idem.KeyHash(key))
	switch code {
	case "missing":
		return nil, fmt.Errorf("%s: %w", what, idem.ErrNotFound)
	case "fenced":
		return nil, fmt.Errorf("%s: the record's token is not %d: %w", what, token, idem.ErrFenced)
	case "notpending":
		return nil, fmt.Errorf("%s: %w", what, idem.ErrNotPending)
	case "live":
		return nil, fmt.Errorf("%s: %w", what, idem.ErrLeaseLive)
	case "pending":
		return nil, fmt.Errorf("%s: %w", what, idem.ErrPending)
	case "ok":
	default:
		return nil, fmt.Errorf("%s answered %v", what, reply)
	}
	if len(a) != 4 {
		return nil, fmt.Errorf("%s answered %v", what, reply)
	}
	st, err := decodeRecord(a[1])
	if err != nil || st == nil {
		return nil, fmt.Errorf("%s: the record as it was: %v", what, err)
	}
	ie, err1 := strconv.ParseInt(fmt.Sprint(a[2]), 10, 64)
	seq, ok := a[3].(int64)
	if err1 == nil && ok {
		s.update(ctx, m, "rem", version{epoch: ie, seq: seq}, time.Time{})
	}
	return st.rec, nil
}

// Audit implements idem.Admin.
func (s *Store) Audit(ctx context.Context, p *idem.AuditParams) (*idem.AuditPage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, fmt.Errorf("redisstore: Audit: limit must be positive, got %d", p.Limit)
	}
	if _, err := s.single("audit"); err != nil {
		return nil, err
	}
	reply, err := s.run(ctx, "audit", auditScript, s.auditKeys(), false, p.Cursor, p.Limit)
	if err != nil {
		return nil, err
	}
	flat, _ := reply.([]any)
	page := &idem.AuditPage{Entries: []*idem.AuditEntry{}}
	for i := 0; i+1 < len(flat); i += 2 {
		id, _ := flat[i].(int64)
		raw, _ := flat[i+1].(string)
		e, err := decodeAuditEntry(raw)
		if err != nil {
			return nil, fmt.Errorf("redisstore: audit entry %d: %w", id, err)
		}
		e.ID = id
		page.Entries = append(page.Entries, e)
	}
	if n := len(page.Entries); n == p.Limit && page.Entries[n-1].ID > 1 {
		page.Next = page.Entries[n-1].ID
	}
	return page, nil
}

// decodeAuditEntry decodes an entry's netstrings (admin_scripts.go).
func decodeAuditEntry(raw string) (*idem.AuditEntry, error) {
	var vals []string
	for raw != "" {
		n, rest, ok := strings.Cut(raw, ":")
		l, err := strconv.Atoi(n)
		if !ok || err != nil || l < 0 || l > len(rest) {
			return nil, errors.New("malformed")
		}
		vals, raw = append(vals, rest[:l]), rest[l:]
	}
	if len(vals)%2 != 0 {
		return nil, errors.New("malformed: odd count")
	}
	e := &idem.AuditEntry{}
	rec := map[string]string{}
	for i := 0; i < len(vals); i += 2 {
		name, v := vals[i], vals[i+1]
		switch name {
		case "@at":
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, err
			}
			e.At = time.UnixMicro(us).UTC()
		case "@actor":
			e.Actor = v
		case "@action":
			e.Action = v
		case "@reason":
			e.Reason = v
		case "@status":
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, err
			}
			e.Status = n
		default:
			rec[name] = v
		}
	}
	st, err := recordFromFields(rec)
	if err != nil {
		return nil, err
	}
	e.Before = st.rec
	e.Scope, e.Key = st.rec.Scope, st.rec.Key
	return e, nil
}

package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// The pending index lets Abandoned find the pending records whose lease
// has ended without reading every record. A record's keys are in its own
// hash slot; the index cannot be (on a Redis Cluster a script touches one
// slot), so it is kept by separate script runs, and it may lag behind the
// records: docs/REDIS.md tells the whole story. Its rules:
//
//   - every pending record has its member in the index, with a score (its
//     LeaseUntil) at most its real LeaseUntil, except for the windows
//     docs/REDIS.md names. A claim that writes a new record reserves its
//     member before it writes (reserveScript); a release lowers the score
//     before it writes;
//   - each member carries the version (epoch, seq) of the record write
//     that set it, and an update older than the member's version is
//     ignored (updateScript), so that updates that arrive out of order
//     never undo newer ones. A reservation's version is (epoch, 0), its
//     epoch new, so that no update of an older record removes it;
//   - Abandoned checks every member it reads against its record, returns
//     only records that are pending with an ended lease, and repairs the
//     member (a new score, or its removal) only if its version has not
//     changed since it read it (swapScript).

// reserveGrace is how long a reservation (a claim between reserving its
// member and writing its record) is left alone by Abandoned. After it, a
// member reserved for a record that was never written is removed.
const reserveGrace = 5 * time.Minute

// indexAction returns what the index should hold for r: its LeaseUntil if
// it is pending, nothing otherwise.
func indexAction(r *idem.Record) (op string, at time.Time) {
	if r.State == idem.StatePending {
		return "set", r.LeaseUntil
	}
	return "rem", time.Time{}
}

// indexRecord brings the member of st up to date, unless the index holds
// a newer version.
func (s *Store) indexRecord(ctx context.Context, m string, st *stored) {
	op, at := indexAction(st.rec)
	s.update(ctx, m, op, st.ver, at)
}

// update applies op of version v to member m unless the member's version
// is newer. A failure is left for Abandoned to repair: the record is
// written already, and the index only lags.
func (s *Store) update(ctx context.Context, m, op string, v version, at time.Time) {
	_, _ = s.run(ctx, "index", updateScript, s.indexKeys(s.indexOf(m)), false, m, "", op, v.epoch, v.seq, micros(at))
}

// swap applies op of version v to member m if its version is still seen
// ("" for none), and reports whether it did.
func (s *Store) swap(ctx context.Context, m, seen, op string, v version, at time.Time) (bool, error) {
	r, err := s.run(ctx, "index", swapScript, s.indexKeys(s.indexOf(m)), false, m, seen, op, v.epoch, v.seq, micros(at))
	return r == int64(1), err
}

// settle ends the reservation of member m (version reserved) by a claim
// that answered st: the member gets st's version and score, or is removed
// if st is completed. If the reservation was replaced meanwhile, the
// update applies only if it is not older than the member's version.
func (s *Store) settle(ctx context.Context, m string, reserved version, st *stored) {
	op, at := indexAction(st.rec)
	if ok, err := s.swap(ctx, m, reserved.String(), op, st.ver, at); err == nil && !ok {
		s.update(ctx, m, op, st.ver, at)
	}
}

// candidate is a member of the index whose score is due.
type candidate struct {
	member string
	score  int64
	ver    string
}

// cursor reads one part of the index, due members lowest score first.
type cursor struct {
	part   int
	offset int
	buf    []candidate
	done   bool
}

// Abandoned implements idem.LeasedStore. It reads the due members of every
// part of the pending index, lowest score first, checks each against its
// record, and stops once it holds Limit records that no unread member can
// precede. It repairs the members it found stale (see the index rules).
func (s *Store) Abandoned(ctx context.Context, p *idem.AbandonedParams) ([]*idem.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Limit <= 0 {
		return nil, nil
	}
	now := p.Now.UnixMicro()
	page := max(p.Limit, 64)
	cursors := make([]*cursor, s.cfg.PendingIndexes)
	for i := range cursors {
		cursors[i] = &cursor{part: i}
	}
	// head returns the cursor whose next member has the lowest score,
	// reading a page where a buffer is empty.
	head := func() (*cursor, error) {
		var best *cursor
		for _, c := range cursors {
			if len(c.buf) == 0 && !c.done {
				if err := s.readDue(ctx, c, now, page); err != nil {
					return nil, err
				}
			}
			if len(c.buf) > 0 && (best == nil || c.buf[0].score < best.buf[0].score) {
				best = c
			}
		}
		return best, nil
	}
	var found []*idem.Record
	var repairs []verified
	for {
		batch := make([]candidate, 0, page)
		for len(batch) < page {
			c, err := head()
			if err != nil {
				return nil, err
			}
			if c == nil {
				break
			}
			batch = append(batch, c.buf[0])
			c.buf = c.buf[1:]
		}
		if len(batch) == 0 {
			break
		}
		vs, err := s.verify(ctx, batch)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if r := v.st; r != nil && r.rec.State == idem.StatePending && r.rec.LeaseUntil.UnixMicro() <= now {
				found = append(found, r.rec)
			}
			repairs = append(repairs, v)
		}
		slices.SortStableFunc(found, func(a, b *idem.Record) int { return a.LeaseUntil.Compare(b.LeaseUntil) })
		if len(found) >= p.Limit {
			c, err := head()
			if err != nil {
				return nil, err
			}
			if c == nil || c.buf[0].score >= found[p.Limit-1].LeaseUntil.UnixMicro() {
				break
			}
		}
	}
	for _, v := range repairs {
		s.repair(ctx, v, now)
	}
	if len(found) > p.Limit {
		found = found[:p.Limit]
	}
	return found, nil
}

// readDue reads the next page of c's due members.
func (s *Store) readDue(ctx context.Context, c *cursor, now int64, page int) error {
	reply, err := s.run(ctx, "abandoned", dueScript, s.indexKeys(c.part), false, now, c.offset, page)
	if err != nil {
		return err
	}
	flat, ok := reply.([]any)
	if !ok || len(flat)%3 != 0 {
		return fmt.Errorf("redisstore: abandoned: the index answered %v", reply)
	}
	for i := 0; i < len(flat); i += 3 {
		m, _ := flat[i].(string)
		sc, _ := flat[i+1].(string)
		v, _ := flat[i+2].(string)
		f, err := strconv.ParseFloat(sc, 64)
		if err != nil {
			return fmt.Errorf("redisstore: abandoned: score %q of %q: %w", sc, m, err)
		}
		c.buf = append(c.buf, candidate{member: m, score: int64(f), ver: v})
	}
	c.offset += len(flat) / 3
	c.done = len(flat)/3 < page
	return nil
}

// verified is a candidate with its record as read after it (st nil when
// there is none).
type verified struct {
	candidate
	st *stored
}

// verify reads the records of batch, in one pipeline.
func (s *Store) verify(ctx context.Context, batch []candidate) ([]verified, error) {
	cmds := make([]*redis.MapStringStringCmd, len(batch))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range batch {
			cmds[i] = p.HGetAll(ctx, recordKeys(c.member)[0])
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("abandoned: read records", err)
	}
	out := make([]verified, len(batch))
	for i, c := range batch {
		out[i].candidate = c
		if f := cmds[i].Val(); len(f) > 0 {
			st, err := recordFromFields(f)
			if err != nil {
				return nil, err
			}
			out[i].st = st
		}
	}
	return out, nil
}

// repair brings the member of v in line with its record if its version has
// not changed since it was read: a pending record's member gets its
// LeaseUntil, a completed or missing record's member is removed. A member
// reserved by a claim (version seq 0) newer than the record is left alone
// for reserveGrace after its score (the claim's Now). After a removal the
// record is read again, and a pending record found then is indexed.
func (s *Store) repair(ctx context.Context, v verified, now int64) {
	seen, hasSeen, err := parseVersion(v.ver)
	if err != nil {
		seen, hasSeen = version{}, false // malformed: repaired below by its swap
	}
	var recVer version
	if v.st != nil {
		recVer = v.st.ver
	}
	if hasSeen && (v.st == nil || recVer.less(seen)) && seen.seq == 0 &&
		v.score+reserveGrace.Microseconds() > now {
		return // a claim may be writing the record: leave its reservation
	}
	if v.st != nil && v.st.rec.State == idem.StatePending {
		if lu := v.st.rec.LeaseUntil.UnixMicro(); lu != v.score || v.ver != recVer.String() {
			_, _ = s.swap(ctx, v.member, v.ver, "set", recVer, v.st.rec.LeaseUntil)
		}
		return
	}
	ok, err := s.swap(ctx, v.member, v.ver, "rem", version{}, time.Time{})
	if err != nil || !ok {
		return
	}
	reply, err := s.c.HGetAll(ctx, recordKeys(v.member)[0]).Result()
	if err != nil || len(reply) == 0 {
		return
	}
	if st, err := recordFromFields(reply); err == nil && st.rec.State == idem.StatePending {
		s.indexRecord(ctx, v.member, st)
	}
}

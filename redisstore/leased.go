package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
)

// Claim implements idem.LeasedStore, in one script run when the key has a
// record that is live or pending (a replay, an answer in flight, a
// takeover). A claim that writes a new record first reserves the key's
// member in the pending index, then claims, then settles the member
// (index.go).
func (s *Store) Claim(ctx context.Context, p *idem.ClaimParams) (*idem.Claim, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Lease <= 0 {
		return nil, fmt.Errorf("redisstore: Claim: lease must be positive, got %s", p.Lease)
	}
	m := s.member(p.Scope, p.Key)
	keys := recordKeys(m)
	reply, err := s.run(ctx, "claim", claimScript, keys, true, claimArgs(p, "0", 0)...)
	if err != nil {
		return nil, err
	}
	c, st, needIndex, err := decodeClaim(reply)
	if err != nil {
		return nil, err
	}
	if !needIndex {
		if c.Claimed { // a takeover: its member is in the index already
			s.indexRecord(ctx, m, st)
		}
		return c, nil
	}
	ix := s.indexKeys(s.indexOf(m))
	epoch, err := s.run(ctx, "claim: reserve", reserveScript, ix, true, m, micros(p.Now))
	if err != nil {
		return nil, err
	}
	e, ok := epoch.(int64)
	if !ok {
		return nil, fmt.Errorf("redisstore: claim: the reservation answered %v", epoch)
	}
	if reply, err = s.run(ctx, "claim", claimScript, keys, true, claimArgs(p, "1", e)...); err != nil {
		return nil, err
	}
	if c, st, needIndex, err = decodeClaim(reply); err != nil {
		return nil, err
	}
	if needIndex {
		return nil, fmt.Errorf("redisstore: claim of key_sha256 %s: the script asked for the index again", idem.KeyHash(p.Key))
	}
	s.settle(ctx, m, version{epoch: e}, st)
	return c, nil
}

// claimArgs are the claim script's ARGV for p (see claimScript).
func claimArgs(p *idem.ClaimParams, indexed string, epoch int64) []any {
	return []any{
		p.Fingerprint, p.Kind, p.Input, micros(p.Now), micros(p.Now.Add(p.Lease)),
		indexed, epoch, p.Scope, p.Key, micros(idem.PendingExpiresAt), micros(p.Now),
		strconv.FormatInt(p.TTL.Microseconds(), 10),
	}
}

// decodeClaim decodes the claim script's answer.
func decodeClaim(reply any) (c *idem.Claim, st *stored, needIndex bool, err error) {
	a, _ := reply.([]any)
	if len(a) == 0 {
		return nil, nil, false, fmt.Errorf("redisstore: claim answered %v", reply)
	}
	code, _ := a[0].(int64)
	switch {
	case code == 2:
		return nil, nil, true, nil
	case code == 0 && len(a) == 2, code == 1 && len(a) == 4:
	default:
		return nil, nil, false, fmt.Errorf("redisstore: claim answered %v", reply)
	}
	if st, err = decodeRecord(a[1]); err != nil {
		return nil, nil, false, err
	}
	if st == nil {
		return nil, nil, false, fmt.Errorf("redisstore: claim answered no record")
	}
	c = &idem.Claim{Record: st.rec}
	if code == 0 {
		return c, st, false, nil
	}
	c.Claimed = true
	c.Lease = idem.Lease{Scope: st.rec.Scope, Key: st.rec.Key, Token: st.rec.Token}
	names, _ := a[2].([]any)
	outs, _ := a[3].([]any)
	if len(names) != len(outs) {
		return nil, nil, false, fmt.Errorf("redisstore: claim answered %d step names and %d outputs", len(names), len(outs))
	}
	for i := range names {
		name, _ := names[i].(string)
		out, _ := outs[i].(string)
		c.Steps = append(c.Steps, idem.Step{Name: name, Output: []byte(out)})
	}
	return c, st, false, nil
}

// Heartbeat implements idem.LeasedStore.
func (s *Store) Heartbeat(ctx context.Context, p *idem.HeartbeatParams) error {
	lu := p.Now.Add(p.Duration)
	return s.fencedWrite(ctx, "heartbeat", heartbeatScript, p.Lease, func(m string, v version) {
		s.update(ctx, m, "set", v, lu)
	}, micros(lu))
}

// SaveStep implements idem.LeasedStore.
func (s *Store) SaveStep(ctx context.Context, p *idem.SaveStepParams) error {
	return s.fencedWrite(ctx, "save step", saveStepScript, p.Lease, nil, p.Name, p.Output)
}

// Complete implements idem.LeasedStore. The record's key expires (Redis
// deletes it) ExpiresAt - Now after the call, or MinRetention after it if
// that is later; its steps are deleted at once.
func (s *Store) Complete(ctx context.Context, p *idem.CompleteParams) error {
	ttl := max(p.ExpiresAt.Sub(p.Now), s.cfg.MinRetention, time.Millisecond)
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	return s.fencedWrite(ctx, "complete", completeScript, p.Lease, func(m string, v version) {
		s.update(ctx, m, "rem", v, time.Time{})
	}, strconv.Itoa(p.Result.Status), encodeHeader(p.Result.Header), p.Result.Body, micros(p.ExpiresAt), int64(ms))
}

// Release implements idem.LeasedStore. The member's score in the pending
// index is lowered to RetryAt first, so that a crash after the release
// leaves the record found from RetryAt on.
func (s *Store) Release(ctx context.Context, p *idem.ReleaseParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := s.member(p.Lease.Scope, p.Lease.Key)
	if _, err := s.run(ctx, "release: index", lowerScript, s.indexKeys(s.indexOf(m)), false, m, micros(p.RetryAt)); err != nil {
		return err
	}
	return s.fencedWrite(ctx, "release", releaseScript, p.Lease, func(m string, v version) {
		s.update(ctx, m, "set", v, p.RetryAt)
	}, micros(p.RetryAt), p.Error)
}

// fencedWrite runs a fenced script for the holder of l, with the token
// first in ARGV, and then after (when not nil) with the record's version
// it answers.
func (s *Store) fencedWrite(ctx context.Context, op string, sc *redis.Script, l idem.Lease, after func(m string, v version), args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := s.member(l.Scope, l.Key)
	reply, err := s.run(ctx, op, sc, recordKeys(m), true, append([]any{strconv.FormatInt(l.Token, 10)}, args...)...)
	if err != nil {
		return err
	}
	switch r := reply.(type) {
	case string:
		switch r {
		case "fenced":
			return fmt.Errorf("redisstore: %s of key_sha256 %s (token %d): %w", op, idem.KeyHash(l.Key), l.Token, idem.ErrFenced)
		case "ok":
			return nil
		}
	case []any:
		if len(r) == 2 {
			e, err1 := strconv.ParseInt(fmt.Sprint(r[0]), 10, 64)
			q, ok := r[1].(int64)
			if err1 == nil && ok {
				if after != nil {
					after(m, version{epoch: e, seq: q})
				}
				return nil
			}
		}
	}
	return fmt.Errorf("redisstore: %s answered %v", op, reply)
}

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/redistest"
)

// The tests of this file break the sequence of script runs as a crash or
// a slow network would (a record written and its index update lost, an
// update arriving late), and check that Abandoned still finds every
// pending record whose lease has ended, and cleans what is stale.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func setup(t *testing.T) (*Store, *redis.Client) {
	t.Helper()
	c := redistest.Client(t)
	s, err := New(c, &Config{Prefix: redistest.Name(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func claimParams(key string, now time.Time) *idem.ClaimParams {
	return &idem.ClaimParams{Scope: "s", Key: key, Fingerprint: "fp", Kind: "k", Input: []byte("in"), Now: now, Lease: time.Minute}
}

func mustClaim(t *testing.T, s *Store, key string, now time.Time) *idem.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), claimParams(key, now))
	if err != nil || !c.Claimed {
		t.Fatalf("Claim(%q) at %v: %+v, %v; want a claim", key, now, c, err)
	}
	return c
}

// indexEntry returns the score and version of key's member in the index.
func indexEntry(t *testing.T, s *Store, c *redis.Client, key string) (score float64, ver string, ok bool) {
	t.Helper()
	ctx := context.Background()
	m := s.member("s", key)
	ix := s.indexKeys(s.indexOf(m))
	score, err := c.ZScore(ctx, ix[0], m).Result()
	if errors.Is(err, redis.Nil) {
		return 0, "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	ver, err = c.HGet(ctx, ix[1], m).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return score, ver, true
}

func abandonedKeys(t *testing.T, s *Store, now time.Time, limit int) []string {
	t.Helper()
	recs, err := s.Abandoned(context.Background(), &idem.AbandonedParams{Now: now, Limit: limit})
	if err != nil {
		t.Fatalf("Abandoned at %v: %v", now, err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	return keys
}

// reserve runs the reservation of a claim of key at now, alone, as a claim
// that crashed right after it does.
func reserve(t *testing.T, s *Store, key string, now time.Time) int64 {
	t.Helper()
	m := s.member("s", key)
	e, err := s.run(context.Background(), "reserve", reserveScript, s.indexKeys(s.indexOf(m)), false, m, micros(now))
	if err != nil {
		t.Fatal(err)
	}
	return e.(int64)
}

// claimRecord runs the claim script alone (reserved with epoch e), as a
// claim that crashed before it settled its reservation does.
func claimRecord(t *testing.T, s *Store, key string, now time.Time, e int64) {
	t.Helper()
	p := claimParams(key, now)
	reply, err := s.run(context.Background(), "claim", claimScript, recordKeys(s.member(p.Scope, p.Key)), false, claimArgs(p, "1", e)...)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _, err := decodeClaim(reply); err != nil || !c.Claimed {
		t.Fatalf("the claim script: %+v, %v", c, err)
	}
}

func TestReservationWithoutRecordIsRemovedAfterTheGrace(t *testing.T) {
	s, c := setup(t)
	reserve(t, s, "k", t0)
	if got := abandonedKeys(t, s, t0.Add(time.Minute), 10); len(got) != 0 {
		t.Fatalf("Abandoned = %v, want nothing: the key has no record", got)
	}
	if _, _, ok := indexEntry(t, s, c, "k"); !ok {
		t.Fatal("a reservation younger than the grace was removed: a claim writing its record now would be left out of the index")
	}
	abandonedKeys(t, s, t0.Add(reserveGrace), 10)
	if _, _, ok := indexEntry(t, s, c, "k"); ok {
		t.Fatal("a reservation older than the grace, with no record, is still in the index")
	}
}

func TestClaimWhoseSettleWasLostIsFoundAndRepaired(t *testing.T) {
	s, c := setup(t)
	e := reserve(t, s, "k", t0)
	claimRecord(t, s, "k", t0, e)
	// Live lease: not returned, and the member gets its real score.
	if got := abandonedKeys(t, s, t0.Add(time.Second), 10); len(got) != 0 {
		t.Fatalf("Abandoned under a live lease = %v, want nothing", got)
	}
	score, ver, ok := indexEntry(t, s, c, "k")
	if want := float64(t0.Add(time.Minute).UnixMicro()); !ok || score != want || ver != fmt.Sprintf("%d:1", e) {
		t.Fatalf("member after repair: score %v, version %q, present %v; want %v, %d:1", score, ver, ok, want, e)
	}
	if got := abandonedKeys(t, s, t0.Add(time.Minute), 10); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("Abandoned at the lease's end = %v, want [k]", got)
	}
}

func TestCompleteWhoseIndexUpdateWasLostIsCleaned(t *testing.T) {
	s, c := setup(t)
	cl := mustClaim(t, s, "k", t0)
	// The completion without its index update.
	_, err := s.run(context.Background(), "complete", completeScript, recordKeys(s.member("s", "k")), false,
		fmt.Sprint(cl.Lease.Token), "200", "", "done", micros(t0.Add(time.Hour)), int64(time.Hour/time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := indexEntry(t, s, c, "k"); !ok {
		t.Fatal("setup: the member is not in the index")
	}
	if got := abandonedKeys(t, s, t0.Add(time.Minute), 10); len(got) != 0 {
		t.Fatalf("Abandoned = %v, want nothing: the record is completed", got)
	}
	if _, _, ok := indexEntry(t, s, c, "k"); ok {
		t.Fatal("the stale member of a completed record is still in the index after Abandoned read it")
	}
}

func TestOlderIndexUpdateIsIgnored(t *testing.T) {
	s, c := setup(t)
	cl := mustClaim(t, s, "k", t0)
	_, ver1, _ := indexEntry(t, s, c, "k")
	if err := s.Heartbeat(context.Background(), &idem.HeartbeatParams{Lease: cl.Lease, Now: t0, Duration: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// The claim's update arrives again, late: it must not undo the
	// heartbeat's.
	v1, _, _ := parseVersion(ver1)
	s.update(context.Background(), s.member("s", "k"), "set", v1, t0.Add(time.Minute))
	// And a removal of that old version must not drop the pending record.
	s.update(context.Background(), s.member("s", "k"), "rem", v1, time.Time{})
	score, _, ok := indexEntry(t, s, c, "k")
	if want := float64(t0.Add(time.Hour).UnixMicro()); !ok || score != want {
		t.Fatalf("member after late older updates: score %v, present %v; want the heartbeat's %v", score, ok, want)
	}
}

// TestLateRemovalKeepsANewRecordIndexed: the completion of a record, whose
// index removal is delayed, expires; a new record of the key is claimed;
// the old removal arrives. The new record stays indexed.
func TestLateRemovalKeepsANewRecordIndexed(t *testing.T) {
	s, c := setup(t)
	ctx := context.Background()
	old := mustClaim(t, s, "k", t0)
	reply, err := s.run(ctx, "complete", completeScript, recordKeys(s.member("s", "k")), false,
		fmt.Sprint(old.Lease.Token), "200", "", "done", micros(t0.Add(time.Second)), int64(time.Hour/time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r := reply.([]any)
	oldVer := version{epoch: mustInt(t, r[0]), seq: r[1].(int64)}
	fresh := mustClaim(t, s, "k", t0.Add(2*time.Second))
	if fresh.Record.Attempts != 1 {
		t.Fatalf("setup: the claim after expiry did not write a new record: %+v", fresh.Record)
	}
	s.update(ctx, s.member("s", "k"), "rem", oldVer, time.Time{})
	if _, _, ok := indexEntry(t, s, c, "k"); !ok {
		t.Fatal("a late removal of the old record dropped the new pending record from the index")
	}
	if got := abandonedKeys(t, s, fresh.Record.LeaseUntil, 10); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("Abandoned at the new lease's end = %v, want [k]", got)
	}
}

func mustInt(t *testing.T, v any) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(fmt.Sprint(v), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAbandonedOrdersAcrossParts: records in every part of the index come
// back longest ended first, Limit at a time.
func TestAbandonedOrdersAcrossParts(t *testing.T) {
	s, _ := setup(t)
	const n = 200
	var want []string
	for _, i := range rand.Perm(n) {
		mustClaim(t, s, fmt.Sprintf("k%03d", i), t0.Add(time.Duration(i)*time.Second))
	}
	for i := range n {
		want = append(want, fmt.Sprintf("k%03d", i))
	}
	end := t0.Add(time.Hour)
	if got := abandonedKeys(t, s, end, 10); !slices.Equal(got, want[:10]) {
		t.Errorf("Abandoned(limit 10) = %v, want %v", got, want[:10])
	}
	if got := abandonedKeys(t, s, end, 1000); !slices.Equal(got, want) {
		t.Errorf("Abandoned(limit 1000) = %d records %v…, want all %d in order", len(got), got[:min(5, len(got))], n)
	}
	// At t0 + 1 min + 99.5 s, leases of k000..k099 have ended.
	if got := abandonedKeys(t, s, t0.Add(time.Minute+99500*time.Millisecond), 1000); !slices.Equal(got, want[:100]) {
		t.Errorf("Abandoned mid-way = %d records, want the first 100", len(got))
	}
}

// TestReleaseWhoseIndexUpdateWasLostIsFoundAtRetryAt: Release lowers the
// member's score before it writes the record, so a crash right after the
// record write still leaves the record found from RetryAt on.
func TestReleaseWhoseIndexUpdateWasLostIsFoundAtRetryAt(t *testing.T) {
	s, _ := setup(t)
	ctx := context.Background()
	cl := mustClaim(t, s, "k", t0)
	retryAt := t0.Add(time.Second)
	m := s.member("s", "k")
	// Release's own steps, without the index update that ends it.
	if _, err := s.run(ctx, "lower", lowerScript, s.indexKeys(s.indexOf(m)), false, m, micros(retryAt)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.run(ctx, "release", releaseScript, recordKeys(m), false, fmt.Sprint(cl.Lease.Token), micros(retryAt), "boom"); err != nil {
		t.Fatal(err)
	}
	if got := abandonedKeys(t, s, retryAt, 10); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("Abandoned at RetryAt = %v, want [k]", got)
	}
}

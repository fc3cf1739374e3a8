package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/redistest"
)

// TestCompletedRecordExpiresByTTL: a pending record has no time to live;
// Complete gives the record one of ExpiresAt - Now and deletes its steps.
func TestCompletedRecordExpiresByTTL(t *testing.T) {
	s, c := setup(t)
	ctx := context.Background()
	keys := recordKeys(s.member("s", "k"))
	cl := mustClaim(t, s, "k", t0)
	if err := s.SaveStep(ctx, &idem.SaveStepParams{Lease: cl.Lease, Name: "a", Output: []byte("1"), Now: t0}); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, keys[0]).Val(); ttl != -1 {
		t.Fatalf("PTTL of a pending record = %v, want none (-1)", ttl)
	}
	// The params' times decide, whatever Redis's clock says: t0 is long
	// past for the server.
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: cl.Lease, Result: idem.Result{Status: 200}, Now: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, keys[0]).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("PTTL of the completed record = %v, want ExpiresAt - Now = 1h", ttl)
	}
	if n := c.Exists(ctx, keys[1], keys[2]).Val(); n != 0 {
		t.Fatalf("%d step keys left after Complete, want 0", n)
	}
}

// TestTokenAfterTheRecordIsGone: once Redis has deleted an expired record,
// the key's next token is still at least Now.UnixMicro() (the floor that
// keeps tokens growing when nothing of the old record is left).
func TestTokenAfterTheRecordIsGone(t *testing.T) {
	c := redistest.Client(t)
	s, err := New(c, &Config{Prefix: redistest.Name(t, c), MinRetention: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	old := mustClaim(t, s, "k", now)
	if err := s.Complete(ctx, &idem.CompleteParams{Lease: old.Lease, Now: now, ExpiresAt: now.Add(time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	rec := recordKeys(s.member("s", "k"))[0]
	deadline := time.Now().Add(30 * time.Second)
	for c.Exists(ctx, rec).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not delete the expired record within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	at := time.Now()
	fresh := mustClaim(t, s, "k", at)
	if fresh.Record.Token < at.UnixMicro() || fresh.Record.Token <= old.Record.Token || fresh.Record.Attempts != 1 {
		t.Fatalf("the claim after deletion: token %d, attempts %d; want at least %d, above %d, and 1",
			fresh.Record.Token, fresh.Record.Attempts, at.UnixMicro(), old.Record.Token)
	}
}

// TestWaitReplicasFailsWithoutReplicas: with WaitReplicas, a write that no
// replica acknowledged fails with ErrNotReplicated and ErrUnavailable.
func TestWaitReplicasFailsWithoutReplicas(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	info := c.Info(ctx, "replication").Val()
	if !strings.Contains(info, "connected_slaves:0") {
		t.Skip("the server has replicas")
	}
	s, err := New(c, &Config{Prefix: redistest.Name(t, c), WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Claim(ctx, claimParams("k", t0))
	if !errors.Is(err, ErrNotReplicated) || !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("Claim with WaitReplicas 1 on a server without replicas: %v; want ErrNotReplicated and ErrUnavailable", err)
	}
}

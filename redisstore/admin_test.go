package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/redisstore"
)

// adminStore opens a store of prefix on srv.
func adminStore(t *testing.T, srv *redistest.Server, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), "redis://"+srv.Addr(), &redisstore.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func claimN(t *testing.T, s *redisstore.Store, n int, now time.Time) {
	t.Helper()
	for i := range n {
		c, err := s.Claim(context.Background(), &idem.ClaimParams{Scope: "s" + strconv.Itoa(i%3), Key: fmt.Sprintf("k%04d", i),
			Fingerprint: "fp", TTL: time.Hour, Now: now, Lease: time.Minute})
		if err != nil || !c.Claimed {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
}

// listAll pages through p and counts each (scope, key).
func listAll(t *testing.T, s *redisstore.Store, p idem.ListParams) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range 10000 {
		page, err := s.List(context.Background(), &p)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) > p.Limit {
			t.Fatalf("a page of %d records, limit %d", len(page.Records), p.Limit)
		}
		for _, r := range page.Records {
			got[r.Scope+"|"+r.Key]++
		}
		if page.Next == "" {
			return got
		}
		p.Cursor = page.Next
	}
	t.Fatal("List never ended")
	return nil
}

// TestAdminListPagesAcrossScanBatches lists more records than one SCAN
// batch holds, in pages that end inside batches: every record once, none
// of another prefix that begins with this one.
func TestAdminListPagesAcrossScanBatches(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerOptions{})
	s := adminStore(t, srv, "p")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 700
	claimN(t, s, n, now)
	claimN(t, adminStore(t, srv, "p:x"), 3, now)
	got := listAll(t, s, idem.ListParams{Limit: 7, Now: now})
	if len(got) != n {
		t.Errorf("listed %d records, want %d", len(got), n)
	}
	for k, c := range got {
		if c != 1 {
			t.Errorf("%s listed %d times", k, c)
		}
	}
	if got := listAll(t, s, idem.ListParams{Scope: "s1", Prefix: "k00", Limit: 5, Now: now}); len(got) != 33 {
		t.Errorf("scope s1, prefix k00: %d records, want 33", len(got))
	}
}

// TestAdminListRepeatsRatherThanDrops resumes a page whose SCAN batch no
// longer ends where it did (as after Redis rehashed its keyspace): the
// batch is listed whole again, so the record of the first page comes
// twice rather than another never.
func TestAdminListRepeatsRatherThanDrops(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerOptions{})
	s := adminStore(t, srv, "p")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	claimN(t, s, 10, now)
	first, err := s.List(context.Background(), &idem.ListParams{Limit: 1, Now: now})
	if err != nil || len(first.Records) != 1 {
		t.Fatalf("first page: %v, %v", first, err)
	}
	parts := strings.SplitN(first.Next, ".", 3)
	if len(parts) != 3 {
		t.Fatalf("cursor %q: want a page that ended inside its batch", first.Next)
	}
	end, _ := strconv.ParseUint(parts[1], 10, 64)
	for _, tt := range []struct {
		cursor string
		want   int
	}{
		{first.Next, 0},
		{parts[0] + "." + strconv.FormatUint(end+1, 10) + "." + parts[2], 1},
	} {
		got := listAll(t, s, idem.ListParams{Limit: 100, Now: now, Cursor: tt.cursor})
		if r := first.Records[0]; got[r.Scope+"|"+r.Key] != tt.want || len(got) != 9+tt.want {
			t.Errorf("from cursor %q: %d records, the first page's %d times; want it %d times", tt.cursor, len(got), got[r.Scope+"|"+r.Key], tt.want)
		}
	}
	if _, err := s.List(context.Background(), &idem.ListParams{Limit: 1, Now: now, Cursor: "x"}); err == nil {
		t.Error("a bad cursor: no error")
	}
}

// TestAdminChangesLeaveNoPendingMember forgets and resolves stale pending
// records: their members leave the pending index (Abandoned would repair
// them, but need not).
func TestAdminChangesLeaveNoPendingMember(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t, redistest.ServerOptions{})
	s := adminStore(t, srv, "p")
	then := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := then.Add(time.Hour)
	claimN(t, s, 2, then)
	if _, err := s.Forget(ctx, &idem.ForgetParams{Scope: "s0", Key: "k0000", Force: true, Now: now,
		Audit: idem.AuditEntry{At: now, Action: idem.AuditForget}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, &idem.ResolveParams{Scope: "s1", Key: "k0001", Result: idem.Result{Status: 200, Body: []byte{0xff, 0, 'x'}},
		ExpiresAt: now.Add(time.Hour), Now: now, Audit: idem.AuditEntry{At: now, Action: idem.AuditResolve}}); err != nil {
		t.Fatal(err)
	}
	members := 0
	iter := srv.Client().Scan(ctx, 0, "{p:pending:*}", 100).Iterator()
	for iter.Next(ctx) {
		members += int(srv.Client().ZCard(ctx, iter.Val()).Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if members != 0 {
		t.Errorf("%d members left in the pending index", members)
	}
	page, err := s.Audit(ctx, &idem.AuditParams{Limit: 10})
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Status != 200 || page.Entries[1].Before.Key != "k0000" {
		t.Fatalf("audit = %+v, %v", page, err)
	}
	rec, err := s.Lookup(ctx, &idem.LookupParams{Scope: "s1", Key: "k0001"})
	if err != nil || string(rec.Result.Body) != "\xff\x00x" {
		t.Errorf("resolved record %+v, %v: want the body byte for byte", rec, err)
	}
}

// TestAdminAuditCursorBeyondTheLog reads the audit log from a cursor
// above its last ID: the newest entries, read without walking the IDs in
// between (the script stops at the log's last ID).
func TestAdminAuditCursorBeyondTheLog(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t, redistest.ServerOptions{})
	s := adminStore(t, srv, "p")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	claimN(t, s, 1, now.Add(-time.Hour))
	if _, err := s.Forget(ctx, &idem.ForgetParams{Scope: "s0", Key: "k0000", Force: true, Now: now,
		Audit: idem.AuditEntry{At: now, Action: idem.AuditForget}}); err != nil {
		t.Fatal(err)
	}
	page, err := s.Audit(ctx, &idem.AuditParams{Limit: 10, Cursor: 1 << 50})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].ID != 1 || page.Next != 0 {
		t.Fatalf("audit from a cursor beyond the log = %+v, %v; want its one entry", page, err)
	}
}

// TestAdminRefusesACluster: on a Redis Cluster client, the calls that
// need the audit log's slot with a record's, or one keyspace to SCAN,
// answer why not before they send anything.
func TestAdminRefusesACluster(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for name, call := range map[string]func() error{
		"List":   func() error { _, err := s.List(ctx, &idem.ListParams{Limit: 1, Now: now}); return err },
		"Forget": func() error { _, err := s.Forget(ctx, &idem.ForgetParams{Scope: "s", Key: "k", Now: now}); return err },
		"Resolve": func() error {
			_, err := s.Resolve(ctx, &idem.ResolveParams{Scope: "s", Key: "k", Now: now})
			return err
		},
		"Audit": func() error { _, err := s.Audit(ctx, &idem.AuditParams{Limit: 1}); return err },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "not a Redis Cluster") {
			t.Errorf("%s on a cluster client: %v, want the refusal", name, err)
		}
	}
}

package transfers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/cmd/idem/internal/transfers"
	"github.com/idemkit/idem/sqlitestore"
)

// A key is free again once its record expires: a request reusing it then
// applies a second transfer, which must be announced under an event id of
// its own. (With an id derived from the intent alone, the outbox kept the
// first event and dropped the second: the read model never saw the
// second transfer.)
func TestEventOfAKeyReusedAfterExpiry(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "bank.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	g, err := idem.New(store, &idem.Config{TTL: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := transfers.New(ctx, transfers.SQLite(store), &transfers.Config{Guard: g, Events: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	c := client{t, srv.URL}
	for id, bal := range map[string]int{"alice": 100, "bob": 0} {
		if r := c.do("PUT", "/accounts/"+id, "", "", fmt.Sprintf(`{"balance":%d}`, bal)); r.status != 200 {
			t.Fatalf("PUT /accounts/%s: %d %s", id, r.status, r.body)
		}
	}
	body := `{"from":"alice","to":"bob","amount":10}`
	first := c.do("POST", "/transfers", "k-reused", "", body)
	if first.status != 201 {
		t.Fatalf("first POST: %d %s", first.status, first.body)
	}
	if r := c.do("POST", "/transfers", "k-reused", "", body); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry within the TTL: %d %q %s, want a replay", r.status, r.header.Get("Idempotent-Replayed"), r.body)
	}
	now.Add(int64(2 * time.Hour))
	second := c.do("POST", "/transfers", "k-reused", "", body)
	if second.status != 201 || second.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after the TTL: %d %q %s, want a new transfer", second.status, second.header.Get("Idempotent-Replayed"), second.body)
	}
	if got := c.balance("bob"); got != 20 {
		t.Fatalf("bob has %d, want 20: two transfers", got)
	}

	claim, err := store.Outbox().Claim(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Abort(ctx)
	msgs := claim.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d events staged, want 2 (one per transfer)", len(msgs))
	}
	var ids [2]int64
	for i, m := range msgs {
		var ev transfers.Event
		if err := json.Unmarshal(m.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.EventID != m.ID {
			t.Errorf("event %d: event_id %q, message id %q", i, ev.EventID, m.ID)
		}
		ids[i] = ev.ID
	}
	if msgs[0].ID == msgs[1].ID || ids[0] == ids[1] {
		t.Fatalf("the two events share an id: %v %v", msgs[0].ID, ids)
	}
}

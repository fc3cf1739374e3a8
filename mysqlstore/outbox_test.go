package mysqlstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/mysqlstore"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/outboxtest"
)

func TestOutboxConformance(t *testing.T) {
	var dsns sync.Map // *mysqlstore.Store → its DSN
	outboxtest.Run(t, &outboxtest.Harness{
		Open: func(t testing.TB) (idem.Store, outbox.Source) {
			dsn := newLocation(t)
			s, err := mysqlstore.Open(context.Background(), dsn, nil)
			if err != nil {
				t.Fatal(err)
			}
			dsns.Store(s, dsn)
			t.Cleanup(func() { _ = s.Close() })
			return s, s.Outbox()
		},
		OpenSource: func(t testing.TB, st idem.Store) outbox.Source {
			dsn, _ := dsns.Load(st)
			other, err := mysqlstore.Open(context.Background(), dsn.(string), &mysqlstore.Config{SkipMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Close() })
			return other.Outbox()
		},
	})
}

// Two claims can hold interleaved messages of one partition key (the scan
// skips rows another claim locked, and no lock covers the key): one holds
// #1, the other #0 and #2. The second publishes #0 only: #2 would
// overtake #1.
func TestOutboxClaimStopsAtAMessageAnotherClaimHolds(t *testing.T) {
	ctx := context.Background()
	s, err := mysqlstore.Open(ctx, newLocation(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	g := guard(t, s)
	var want []string
	for i := range 3 {
		key := fmt.Sprint("k", i)
		if _, _, err := g.Do(ctx, idem.Request{Scope: "s", Key: key, Fingerprint: "fp"}, func(ctx context.Context) (idem.Result, error) {
			return idem.Result{Status: 200}, outbox.Stage(ctx, outbox.Message{Name: "m", PartitionKey: "p0"})
		}); err != nil {
			t.Fatal(err)
		}
		want = append(want, outbox.ID(idem.StoredScope("s"), key, "m"))
	}
	src := s.Outbox()
	claimOf := func(n int) outbox.Claim {
		t.Helper()
		c, err := src.Claim(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	messages := func(c outbox.Claim) []string {
		var ids []string
		for _, e := range c.Messages() {
			ids = append(ids, e.ID)
		}
		return ids
	}
	z := claimOf(1) // locks #0
	a := claimOf(1) // locks #1, publishes nothing: #0 is z's
	defer a.Abort(ctx)
	if got := messages(a); len(got) != 0 {
		t.Fatalf("a claim behind another's message of its key got %v, want nothing", got)
	}
	if err := z.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	b := claimOf(3) // locks #0 and #2, skips #1
	defer b.Abort(ctx)
	if got := messages(b); !slices.Equal(got, want[:1]) {
		t.Errorf("a claim holding #0 and #2 of a key while another holds #1 publishes %v, want %v (#0 only)", got, want[:1])
	}
}

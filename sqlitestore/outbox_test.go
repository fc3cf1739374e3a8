package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/outboxtest"
	"github.com/idemkit/idem/sqlitestore"
)

func TestOutboxConformance(t *testing.T) {
	outboxtest.Run(t, &outboxtest.Harness{
		Open: func(t testing.TB) (idem.Store, outbox.Source) {
			s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, s.Outbox()
		},
	})
}

// TestOutboxOneRelayPerFile checks that a second claim of the same file
// fails while the first is open, and succeeds once it has ended.
func TestOutboxOneRelayPerFile(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Outbox().Claim(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox().Claim(ctx, 10); !errors.Is(err, sqlitestore.ErrRelayBusy) {
		t.Fatalf("a second claim of the file = %v, want ErrRelayBusy", err)
	}
	if err := c.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	c, err = s.Outbox().Claim(ctx, 10)
	if err != nil {
		t.Fatalf("a claim after the first ended: %v", err)
	}
	_ = c.Abort(ctx)
}

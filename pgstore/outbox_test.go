package pgstore_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/outboxtest"
	"github.com/idemkit/idem/pgstore"
)

func openOutboxStore(t testing.TB) *pgstore.Store {
	t.Helper()
	_, dsn := pgtest.Schema(t)
	s, err := pgstore.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func outboxOf(t testing.TB, s *pgstore.Store) outbox.Source {
	o := s.Outbox()
	t.Cleanup(func() { _ = o.Close() })
	return o
}

func TestOutboxConformance(t *testing.T) {
	outboxtest.Run(t, &outboxtest.Harness{
		Open: func(t testing.TB) (idem.Store, outbox.Source) {
			s := openOutboxStore(t)
			return s, outboxOf(t, s)
		},
		OpenSource: func(t testing.TB, s idem.Store) outbox.Source { return outboxOf(t, s.(*pgstore.Store)) },
	})
}

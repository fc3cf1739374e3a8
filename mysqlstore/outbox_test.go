package mysqlstore_test

import (
	"context"
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

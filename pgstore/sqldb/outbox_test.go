package sqldb_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/outboxtest"
	"github.com/idemkit/idem/pgstore/sqldb"
)

func TestOutboxConformance(t *testing.T) {
	outboxtest.Run(t, &outboxtest.Harness{
		Open: func(t testing.TB) (idem.Store, outbox.Source) {
			schema, _ := pgtest.Schema(t)
			s, err := sqldb.New(context.Background(), newDB(t, dbOptions{schema: schema}), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s, s.Outbox()
		},
		OpenSource: func(t testing.TB, s idem.Store) outbox.Source { return s.(*sqldb.Store).Outbox() },
	})
}

package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/outbox/outboxtest"
	"github.com/idemkit/idem/pgstore"
	"github.com/idemkit/idem/pgstore/internal/pgschema"
	"github.com/jackc/pgx/v5"
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

// A sent message leaves a dead entry in the pending index until VACUUM. A
// claim scans that index in order, so that it marks such entries dead once
// and skips them from then on; as a bitmap scan it would visit the heap
// row of each on every claim, and an empty claim's cost would grow with
// the messages sent since the last VACUUM (0.5 ms after 7,000 here). The
// planner chooses the bitmap on a table without statistics: a new outbox,
// until autovacuum first analyzes it.
func TestOutboxClaimScansThePendingIndexInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, dsn := pgtest.Schema(t)
	s, err := pgstore.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	n := pgschema.NewNames(schema, "idem_records")
	st := pgschema.NewOutboxStatements(n)
	for _, q := range []string{
		`INSERT INTO ` + n.Outbox + ` (id, scope, key, name, subject, body)
			SELECT 'm' || i, 's', 'k' || i, 'created', 't.created', '\x00' FROM generate_series(1, 5000) AS i`,
		`UPDATE ` + n.Outbox + ` SET sent_at = now()`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	plan := func(settings string) string {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, settings); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+st.Claim, n.OutboxLockNS, 100)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	// Without the claim's settings, the planner chooses a bitmap scan of
	// the pending index here (the table has no statistics yet): what this
	// test guards against.
	if p := plan(`SET LOCAL synchronous_commit TO off`); !strings.Contains(p, "Bitmap") {
		t.Logf("without the claim's settings the plan has no bitmap scan on this server:\n%s", p)
	}
	p := plan(st.ClaimSettings)
	if strings.Contains(p, "Bitmap") || !strings.Contains(p, "Index Scan using "+strings.Trim(n.OutboxPending, `"`)) {
		t.Errorf("the claim does not scan %s in order:\n%s", n.OutboxPending, p)
	}
}

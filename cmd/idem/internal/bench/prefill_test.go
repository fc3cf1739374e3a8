package bench

import (
	"testing"

	"github.com/idemkit/idem/sqlitestore"
)

// The prefill writes exactly the live records asked for into
// the service's own table (a live record of scope "prefill", expiring in
// the future), and measures the table.
func TestPrefillSQLite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := openSQLite(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.close(ctx)
	const n = 1000
	r, err := b.prefill(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	db := b.store.(*sqlitestore.Store).DB()
	var live int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM idem_records WHERE scope = 'prefill' AND state = 'completed' AND expires_at > created_at`).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != n || r.Live != n || r.PerRow <= 0 {
		t.Fatalf("%d live records, report %+v; want %d and a size", live, r, n)
	}
}

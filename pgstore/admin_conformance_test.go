package pgstore_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem/admintest"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/pgstore"
)

// TestAdminConformance runs the idem.Admin suite on pgstore, each case in a
// fresh schema.
func TestAdminConformance(t *testing.T) {
	pgtest.Require(t)
	admintest.Run(t, admintest.Harness{Open: func(t testing.TB) admintest.Store {
		_, dsn := pgtest.Schema(t)
		s, err := pgstore.Open(context.Background(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}})
}

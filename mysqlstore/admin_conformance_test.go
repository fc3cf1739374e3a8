package mysqlstore_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem/admintest"
	"github.com/idemkit/idem/mysqlstore"
)

// TestAdminConformance runs the idem.Admin suite on mysqlstore, each case
// in a fresh database.
func TestAdminConformance(t *testing.T) {
	admintest.Run(t, admintest.Harness{Open: func(t testing.TB) admintest.Store {
		s, err := mysqlstore.Open(context.Background(), newLocation(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}})
}

package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idemkit/idem/admintest"
	"github.com/idemkit/idem/sqlitestore"
)

func TestAdminConformance(t *testing.T) {
	admintest.Run(t, admintest.Harness{Open: func(t testing.TB) admintest.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}})
}

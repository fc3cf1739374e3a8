package redisstore_test

import (
	"context"
	"testing"

	"github.com/idemkit/idem/admintest"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/redisstore"
)

// TestAdminConformance runs the admintest suite on a private Redis server
// (one for the test; each case has a key prefix of its own).
func TestAdminConformance(t *testing.T) {
	srv := redistest.StartServer(t, redistest.ServerOptions{})
	admintest.Run(t, admintest.Harness{Open: func(t testing.TB) admintest.Store {
		s, err := redisstore.Open(context.Background(), "redis://"+srv.Addr(), &redisstore.Config{Prefix: redistest.Name(t, srv.Client())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}})
}

package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/leasetest"
	"github.com/idemkit/idem/redisstore"
)

// TestLeasedConformance runs the leasetest suite on the Redis server of
// internal/redistest. A location is a key prefix of its own (deleted when
// its case ends); a store opened on it has a client of its own, so data
// survives Close and reaches a child process: the store is Persistent. It
// has no local steps (no Effect).
func TestLeasedConformance(t *testing.T) {
	addr := redistest.Require(t)
	leasetest.Run(t, leasetest.Harness{
		NewLocation: func(t testing.TB) string {
			return redistest.Name(t, redistest.Client(t))
		},
		Open: func(ctx context.Context, prefix string) (idem.LeasedStore, error) {
			return redisstore.Open(ctx, "redis://"+addr, &redisstore.Config{Prefix: prefix})
		},
		Close:      func(s idem.LeasedStore) error { return s.(*redisstore.Store).Close() },
		Persistent: true,
	})
}

var _ redis.UniversalClient = (*redis.ClusterClient)(nil)

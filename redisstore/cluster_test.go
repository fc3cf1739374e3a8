//go:build unix

package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/leasetest"
	"github.com/idemkit/idem/redisstore"
)

// clusterLocation is a location of the cluster suite: the nodes' addresses
// and a key prefix, as "addr,addr,…/prefix", so that the crash case's
// child process reaches the cluster its parent started.
func clusterLocation(addrs []string, prefix string) string {
	return strings.Join(addrs, ",") + "/" + prefix
}

func openClusterLocation(ctx context.Context, loc string) (*redisstore.Store, error) {
	addrs, prefix, ok := strings.Cut(loc, "/")
	if !ok {
		return nil, fmt.Errorf("cluster location %q", loc)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	s, err := redisstore.New(c, &redisstore.Config{Prefix: prefix})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return s, nil
}

// TestClusterLeasedConformance runs the leasetest suite, unchanged, on a
// *redis.ClusterClient of a three-master Redis Cluster the test starts. A
// script that touched keys of two hash slots would fail there with
// CROSSSLOT.
func TestClusterLeasedConformance(t *testing.T) {
	var (
		once   sync.Once
		addrs  []string
		prefix atomic.Int64
	)
	leasetest.Run(t, leasetest.Harness{
		// The cluster starts with the first location (the crash case's
		// child never asks for one), and lives until the test ends.
		NewLocation: func(sub testing.TB) string {
			once.Do(func() {
				addrs = redistest.StartCluster(outliving{sub, t}, 3, 0, redistest.ServerOptions{}).Addrs()
			})
			if addrs == nil {
				sub.Fatal("the cluster did not start")
			}
			return clusterLocation(addrs, fmt.Sprintf("loc%d", prefix.Add(1)))
		},
		Open: func(ctx context.Context, loc string) (idem.LeasedStore, error) {
			return openClusterLocation(ctx, loc)
		},
		Close: func(s idem.LeasedStore) error {
			return s.(*redisstore.Store).Client().Close()
		},
		Persistent: true,
	})
}

// outliving is a subtest's testing.TB whose clean-ups and temporary
// directories are its parent's: what it starts lives until the parent
// ends, and a failure still stops the subtest.
type outliving struct {
	testing.TB
	parent testing.TB
}

func (o outliving) Cleanup(f func()) { o.parent.Cleanup(f) }
func (o outliving) TempDir() string  { return o.parent.TempDir() }

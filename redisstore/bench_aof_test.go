//go:build unix

package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/internal/redistest"
	"github.com/idemkit/idem/redisstore"
)

// BenchmarkLeasedRedisAOFVsPostgres is BenchmarkLeasedRedisVsPostgres on a
// redis-server of the benchmark's own with appendonly yes and appendfsync
// always (every write on disk before Redis answers, as PostgreSQL's
// commit), instead of the shared server.
//
//	go test -run '^$' -bench LeasedRedisAOFVsPostgres -benchtime 20x -count 3 ./redisstore/
func BenchmarkLeasedRedisAOFVsPostgres(b *testing.B) {
	leasedRedisVsPostgres(b, func(b *testing.B) *redisstore.Store {
		srv := redistest.StartServer(b, redistest.ServerOptions{AppendOnly: true, AppendFsync: "always"})
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		b.Cleanup(func() { _ = c.Close() })
		s, err := redisstore.New(c, nil)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
